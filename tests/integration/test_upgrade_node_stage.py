"""The roll's certifier runs localisation's per-node stage on the node it certifies.

A real SSH test host (network namespace, sshd) plays the node; the stage is the probe
`rackcert bench --localise` sends (validation.bench.node.probe), and its row becomes the
node's figures, named `<unit>.<metric>` (rackcert.upgrade.evidence.node_figures), which the
roll judges against the node's baseline and the rack's median (rackcert.upgrade.judge).
"""

from __future__ import annotations

import shutil

from rackcert.core.runs import RunDir
from rackcert.rollout import ValidateCertifier
from tests.support.plugins.configure import spec_for_hosts


def test_the_certifier_measures_the_node_alone_over_ssh(ssh_hosts, tmp_path):
    (host,) = ssh_hosts(["n1"])
    loaded = spec_for_hosts([host], tmp_path / "spec")
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
    # The rack's known_hosts (rackcert.core.known_hosts.rack_file): the host's enrolled key.
    shutil.copy(host.known_hosts, run.path.parent / "known_hosts")
    certifier = ValidateCertifier(
        loaded, loaded, run, run, tmp_path / "runs", remote_python="python3"
    )
    figures, reference = certifier._node_figures(loaded, host.name, run)
    assert figures.get("cpu.gemm_gflops", 0) > 0, figures
    assert figures.get("cpu.memcpy_gb_s", 0) > 0, figures
    # The test host is a namespace on this machine (one kernel, one boot_id): the same probe
    # on the controller at the same barrier is kept as its reference, figure by figure.
    assert set(reference) == set(figures), (figures, reference)
    assert all(v > 0 for v in reference.values()), reference
    log = (run.path / "artifacts" / "upgrade" / "node-stage.log").read_text()
    assert "reference" in log
