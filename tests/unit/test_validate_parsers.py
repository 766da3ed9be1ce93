"""Parsers on output captured from a real NVIDIA H200 (tests/support/fixtures/h200/) and tool
layouts."""

from __future__ import annotations

import pytest

from tests.support.paths import FIXTURES
from validation import parsers

H200 = FIXTURES / "h200"


def fx(name: str) -> str:
    return (H200 / f"{name}.txt").read_text()


def test_query_gpu_csv_from_h200():
    (gpu,) = parsers.gpu_query_csv(fx("nvidia-smi-query-gpu"))
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["driver_version"].startswith("580.")
    assert gpu["memory.total"] == "143771"  # the unit moved out of the header key
    assert gpu["retired_pages.pending"] is None  # [N/A] on Hopper (row remapping instead)
    assert gpu["pcie.link.width.current"] == "16"


def test_query_gpu_csv_rejects_error_text():
    with pytest.raises(parsers.ParseError):
        parsers.gpu_query_csv('Field "x.y" is not a valid field to query.')


def test_smi_q_header_from_h200():
    head = parsers.smi_q_header(fx("nvidia-smi-q"))
    assert head["CUDA Version"] == "13.0"
    assert head["Attached GPUs"] == "1"


def test_topo_single_gpu_from_h200_has_escape_codes_and_no_pairs():
    assert "\x1b[" in fx("nvidia-smi-topo-m")
    topo = parsers.topo_matrix(fx("nvidia-smi-topo-m"))
    assert topo.gpus() == ["GPU0"]
    assert topo.link("GPU0", "GPU0") == "X"
    assert topo.link("GPU0", "GPU1") is None


def test_topo_pair_layout():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-31\nGPU1\tNV12\t X \t0-31\n\nLegend:\n"
    assert parsers.topo_matrix(text).link("GPU0", "GPU1") == "NV12"


def test_nvlink_status_empty_on_h200_and_pair_layout():
    assert parsers.nvlink_status(fx("nvidia-smi-nvlink-s")) == []
    text = "GPU 0: NVIDIA A100 (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
    (g,) = parsers.nvlink_status(text)
    assert (g.index, g.active, g.inactive) == (0, [25.0], 1)


def test_xid_lines():
    assert parsers.xid_events(fx("dmesg-xid")) == []  # NVRM lines, no Xid, on the H200
    line = "[  9.1] NVRM: Xid (PCI:0000:17:00): 79, pid=0, GPU has fallen off the bus."
    assert parsers.xid_events(line) == [("0000:17:00", 79, "pid=0, GPU has fallen off the bus.")]


def test_modules_cuda_os_from_h200():
    assert {"nvidia", "nvidia_uvm"} <= parsers.module_names(fx("proc-modules"))
    assert parsers.cuda_toolkit(fx("nvcc")) == "13.0.88"
    assert parsers.cuda_toolkit('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}') == "12.4.1"
    assert parsers.os_release(fx("os-release"))["VERSION_ID"] == "24.04"


def test_mountinfo_from_h200_and_nfs_line():
    mounts = {m.mount_point: m for m in parsers.mountinfo(fx("mountinfo"))}
    assert mounts["/usr/local/nvidia"].fstype == "squashfs"
    nfs = (
        "80 27 0:50 / /mnt/data rw,relatime shared:40 - nfs powerscale:/ifs/data/imagenet"
        " rw,vers=3,rsize=1048576,wsize=1048576,hard,nconnect=8,proto=tcp"
    )
    (m,) = parsers.mountinfo(nfs)
    assert m.source == "powerscale:/ifs/data/imagenet"
    assert {"vers=3", "nconnect=8", "hard"} <= m.options


def test_ofed_ibdev_mlxconfig_layouts():
    assert parsers.ofed_version("MLNX_OFED_LINUX-5.4-3.1.0.0:\n") == "5.4-3.1.0.0"
    with pytest.raises(parsers.ParseError):
        parsers.ofed_version(fx("ofed-info"))  # "command not found" is not a version
    ports = parsers.ibdev2netdev(
        "mlx5_0 port 1 ==> ens1f0np0 (Up)\nmlx5_1 port 1 ==> ens1f1np1 (Down)"
    )
    assert [p.up for p in ports] == [True, False]
    mlx = (
        "Device #1:\n----------\nDevice:         0000:4b:00.0\n\nConfigurations:   Next Boot\n"
        "         ATS_ENABLED                         False(0)\n"
    )
    assert parsers.mlxconfig_ats(mlx) == {"0000:4b:00.0": "False(0)"}


def test_clock_and_net():
    assert parsers.clock_synced("timedatectl NTPSynchronized=no")[0] is False
    assert parsers.clock_synced("Reference ID : C0A80101\nLeap status     : Normal\n")[0] is True
    net = parsers.net_state("mtu eth0 1400\nmtu lo 65536\nroute default dev eth0")
    assert (net.mtu["eth0"], net.default_dev) == (1400, "eth0")


def test_pyinfra_facts_process_real_h200_output():
    """rackcert's own pyinfra facts on the H200's output (pyinfra's KernelModules fails there)."""
    from validation.facts.gpu import GpuQuery
    from validation.facts.system import LoadedModules

    mods = LoadedModules().process(fx("proc-modules").splitlines())
    assert mods["nvidia"]["used"] == "-" and mods["nvidia_uvm"]["state"] == "Live"
    (gpu,) = GpuQuery().process(fx("nvidia-smi-query-gpu").splitlines())
    assert gpu["name"] == "NVIDIA H200"
