"""The one table that says how a VM gets its GPUs, and the page that prints it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from rackcert.core.gpu_attach import (
    DEVICE_GROUP_API,
    NVAIE_NVSWITCH,
    TABLE,
    GpuKind,
    Mechanism,
    decide,
    host_line,
    support_table_markdown,
)
from rackcert.core.spec import GpuMode

DOC = Path(__file__).resolve().parents[2] / "docs" / "vsphere.md"


def test_every_kind_release_and_mode_has_one_answer():
    cells = set(itertools.product(GpuKind, ("7.0", "8.0"), GpuMode))
    assert set(TABLE) == cells
    for decision in TABLE.values():
        assert (decision.mechanism is None) == bool(decision.refusal)
        assert decision.source


@pytest.mark.parametrize(
    ("kind", "version", "mode", "want"),
    [
        (GpuKind.pcie, "7.0.3", GpuMode.passthrough, Mechanism.passthrough),
        (GpuKind.nvlink_pair, "7.0.3", GpuMode.passthrough, Mechanism.passthrough),
        (GpuKind.nvlink_pair, "8.0.3", GpuMode.passthrough, Mechanism.device_group_passthrough),
        (GpuKind.nvlink_pair, "8.0", GpuMode.vgpu, Mechanism.device_group_vgpu),
        (GpuKind.nvswitch, "8.0.2", GpuMode.vgpu, Mechanism.device_group_vgpu),
    ],
)
def test_allowed(kind, version, mode, want):
    assert decide(kind, version, mode).mechanism is want


def test_nvswitch_refusals_cite_their_statement():
    assert decide(GpuKind.nvswitch, "8.0.3", GpuMode.passthrough).refusal == NVAIE_NVSWITCH
    assert decide(GpuKind.nvswitch, "7.0.3", GpuMode.passthrough).refusal == NVAIE_NVSWITCH
    assert decide(GpuKind.nvswitch, "7.0.3", GpuMode.vgpu).refusal == DEVICE_GROUP_API


def test_the_older_release_of_vcenter_and_host_decides():
    assert host_line("8.0.3", "8.0.3") == "8.0"
    assert host_line("8.0.3", "7.0.3") == "7.0"
    assert host_line("7.0.3", "8.0.1") == "7.0"


def test_docs_print_the_table_as_the_code_has_it():
    text = DOC.read_text()
    start = text.index("<!-- gpu-attach-table")
    start = text.index("\n", start) + 1
    end = text.index("<!-- /gpu-attach-table -->")
    assert text[start:end].strip() == support_table_markdown()
