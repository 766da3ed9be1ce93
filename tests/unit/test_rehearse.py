"""Rehearse on a copy of the real vCenter first: capture, a twin from it, provision there.

The "real" vCenter of these tests is a twin too (the only vCenter a test can have); the
rehearsal's twin is a second one, started from the capture. Each test checks that the
real one is left as it was: the same capture before and after, and its state file
byte for byte.
"""

from __future__ import annotations

import json

from rackcert.core.capture.model import load_capture
from rackcert.core.paths import REPO_ROOT


def test_checked_in_capture_schema_is_current() -> None:
    import jsonschema

    from rackcert.core.capture.model import json_schema

    path = REPO_ROOT / "schemas" / "capture.schema.json"
    assert json.loads(path.read_text()) == json_schema(), (
        "schemas/capture.schema.json is stale: regenerate it with"
        " `rackcert capture --schema > schemas/capture.schema.json`"
    )
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_a_capture_written_before_num_cpus_loads_and_is_written_with_it(tmp_path):
    """Captures are kept for bug reports and replays: the VM CPU count's old key still reads."""
    from rackcert.core.capture.model import Capture, Vm

    old = Capture(vms=[Vm(name="vm1", num_cpus=8)], taken_at="2026-01-01T00:00:00Z")
    text = old.to_json().replace('"num_cpus"', '"cpus"')
    assert '"cpus": 8' in text
    path = tmp_path / "old.json"
    path.write_text(text)
    loaded = load_capture(path)
    assert loaded.vms[0].num_cpus == 8
    assert '"num_cpus": 8' in loaded.to_json() and '"cpus"' not in loaded.to_json()


def test_a_capture_written_before_the_shared_facts_loads_whole() -> None:
    """A capture written by an older release (tests/support/fixtures/capture) loads, and says again
    every value it held: only `cpus` reads as `num_cpus`, nothing else moves or is lost."""
    path = REPO_ROOT / "tests" / "support" / "fixtures" / "capture" / "written-with-cpus.json"
    old = json.loads(path.read_text())
    loaded = load_capture(path)
    assert [v.num_cpus for v in loaded.vms] == [16, 2]
    for vm in old["vms"]:
        vm["num_cpus"] = vm.pop("cpus")
    assert loaded.model_dump(mode="json") == old


def test_a_capture_and_a_live_read_name_a_fact_alike() -> None:
    """One model of vCenter's objects: what a capture and discovery both hold about a host,
    a VM or a PCI function is declared once (rackcert.core.observed), so a name cannot
    drift apart again (`cpus` against `num_cpus`)."""
    from rackcert.core import observed
    from rackcert.core.capture import model

    for facts, live, captured in (
        (observed.HostState, observed.ObservedHost, model.Host),
        (observed.VmConfig, observed.ObservedVm, model.Vm),
        (observed.PciIds, observed.PciDevice, model.PciFunction),
    ):
        assert issubclass(live, facts) and issubclass(captured, facts)
        for name, field in facts.model_fields.items():
            same = {repr(live.model_fields[name]), repr(field), repr(captured.model_fields[name])}
            assert len(same) == 1, (name, same)
    assert model.Vm.model_config["extra"] == "forbid"  # a capture stays strict
    assert observed.ObservedVm.model_config["extra"] == "allow"
