"""Parsers on output captured from a real NVIDIA H200 (tests/support/fixtures/h200/) and tool
layouts."""

from __future__ import annotations

from validation.expect import NodeExpect, Peer
from validation.facts.net import Ofed
from validation.facts.system import Hostname, LinuxDistribution
from validation.probes import build_script, split_output


def test_script_markers_roundtrip_and_missing_tool(tmp_path):
    """The probe script really runs in sh here; a missing tool is reported, not executed."""
    import subprocess

    expect = NodeExpect(node="n1", address="127.0.0.1", peers=[Peer(name="p", address="x")])
    script = build_script([LinuxDistribution, Ofed, Hostname], expect, tool_path=str(tmp_path))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    got = split_output(out)
    assert "ID=" in got["os"].text and got["os"].ok
    assert LinuxDistribution().process(got["os"].text.splitlines())["release_meta"]["ID"]
    assert got["ofed"].missing == "ofed_info" and got["ofed"].why() == "ofed_info not found"
    assert got["hostname"].rc == 0 and got["hostname"].text
