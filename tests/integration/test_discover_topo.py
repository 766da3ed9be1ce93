"""`nvidia-smi topo -m` parsing, guest -> host GPU mapping, and correcting nvlink_peer."""

from __future__ import annotations

import subprocess

import pytest

from rackcert.core.errors import InputError
from rackcert.discover.topo import (
    map_to_host,
    parse_bus_ids,
    parse_topo,
)
from tests.support.paths import FAKES


def fake(name: str, *args: str) -> str:
    return subprocess.run(
        [str(FAKES / name), *args], capture_output=True, text=True, check=True
    ).stdout


def test_fake_nvlink_pair_parses_to_nv12():
    matrix = parse_topo(fake("nvidia-smi-nvlink-pair", "topo", "-m"))
    assert matrix.gpus == [0, 1]
    assert matrix.nvlinks() == {(0, 1): 12}
    assert matrix.cells[(0, 0)] == "X"


def test_fake_pcie_pair_has_no_nvlink():
    matrix = parse_topo(fake("nvidia-smi-pcie-pair", "topo", "-m"))
    assert matrix.nvlinks() == {}
    assert matrix.cells[(0, 1)] == "SYS"


def test_bus_ids_from_the_fake_query():
    ids = parse_bus_ids(
        fake("nvidia-smi-nvlink-pair", "--query-gpu=index,pci.bus_id", "--format=csv,noheader")
    )
    assert ids == {0: "0000:13:00.0", 1: "0000:1b:00.0"}


def test_gpu_count_mismatch_is_an_error_naming_the_vm():
    matrix = parse_topo(fake("nvidia-smi-nvlink-pair", "topo", "-m"))
    with pytest.raises(InputError) as info:
        map_to_host(matrix, ["0000:17:00.0"], vm="node7")
    assert "VM node7" in str(info.value) and "2 GPU(s)" in str(info.value)
