"""Every test is `unit` or `integration`, decided in one place.

integration: the test starts real components (the vcsim twin, SSH test hosts in network
namespaces, which need root; ansible-runner against hosts; torchrun or horovodrun
launches; a browser; PDF rendering), by the fixtures it uses or the module it is in.
unit: everything else, so `pytest -m unit` runs in under a minute without root. A module
or test that sets either marker itself keeps it.
"""

from __future__ import annotations

import pytest

INTEGRATION_FIXTURES = {
    "rack_twin",
    "vcsim_binary",
    "ssh_hosts",
    "ssh_hosts_module",
    "ssh_hosts_session",
    "fake_vendor_repo",
    "built_pair",
    "small_mount",  # test_runs: a real tmpfs, which only root may mount
}
INTEGRATION_MODULES = {
    "test_bench_gloo",
    "test_bench_horovod",
    "test_bench_ssh",
    "test_bench_k8s",
    "test_configure_faults",
    "test_configure_lint",
    "test_configure_site",
    "test_configure_sshhosts",
    "test_discover_nodes",
    "test_discover_twin",
    "test_e2e_bootstrap",
    "test_e2e_node_faults",
    "test_e2e_vcenter_faults",
    "test_report_browser",
    "test_report_secrets",
    "test_spec_fuzz",
    "test_report_pdf",
    "test_report_serve",
    "test_validate_after_upgrade",
    "test_validate_local",
    "test_validate_nodes",
    "test_validate_twin",
    "test_vsphere_discovery",
    "test_vsphere_lab",
    "test_vsphere_modes",
    "test_vsphere_provision",
    "test_vsphere_session",
}


# Single tests that start torch, a real ansible-runner run, the validate check suite (a
# pytest process) or a rackcert process per call, in otherwise quick modules.
INTEGRATION_TESTS = {
    "test_seeded_fused_sgd_matches_unfused_when_the_first_step_overflows",
    "test_every_command_has_help",
    "test_cli_rejects_unknown_tag_and_missing_password_env_in_one_line",
    "test_h200_evidence_renders",
    "test_ansible_gets_a_named_environment_without_passwords",  # ansible-runner
    "test_check_suite_gets_a_named_environment_without_passwords",  # the check suite
    "test_configure_extra_vars_are_never_templated",  # ansible-runner
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("unit") or item.get_closest_marker("integration"):
            continue
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        slow = item.get_closest_marker("slow") is not None
        heavy = module in INTEGRATION_MODULES or item.originalname in INTEGRATION_TESTS
        if slow or heavy or fixtures & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)
