"""The burn-in's watch and verdicts against a FAKE NVML and kernel log (tests/support/fake_nvml):
each planted GPU fault is named alone, at its minute; a clean run names nothing.

The node's own sampler (validation.bench.node.burnin.Watch) runs on a simulated clock: twenty
minutes of 1-s samples of two fake H100s at their power cap take milliseconds. The load's
GEMM rate follows the fake's SM clock, as a real GPU's does. The HBM pattern test runs for
real on CPU tensors, with one planted bit flip between its write and its read-back; the port
counters are read from a sysfs-like tree whose `symbol_error` grows at the planted minute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_burnin_run import MINUTES, simulated_run
from tests.support.fake_nvml import Plant
from validation.bench.burnin.judge import Rules, judge_nodes


def judged(rec: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    found, told, _gpus, unmeasured = judge_nodes({"n1": rec}, Rules())
    assert unmeasured == []
    return found, told


def test_a_clean_run_names_nothing_and_reports_the_power_cap(tmp_path: Path) -> None:
    rec = simulated_run(tmp_path, None)
    assert len(rec["series"]["t"]) == MINUTES * 60
    found, told = judged(rec)
    assert found == []
    # the SW power cap of a GEMM at the cap: reported on both GPUs, every sample, not judged
    assert [(r["part"], r["what"], r["share"]) for r in told] == [
        ("1652322000000", "sw_power_cap", 1.0),
        ("1652322000001", "sw_power_cap", 1.0),
    ]
    # the counters were read before and after, with what the part does not support as None
    g = rec["counters"]["before"]["gpus"]["0"]
    assert g["ecc"]["aggregate_sbe"] == 3 and g["remapped_rows"]["pending"] is False
    assert g["retired_pages"] == {"sbe": None, "dbe": None, "pending": None}
    assert rec["counters"]["after"]["ports"]["mlx5_0/1"]["state"] == "ACTIVE"


@pytest.mark.parametrize(
    ("plant", "rule", "kind", "minute"),
    [
        (Plant("xid", 7, gpu=1), "xid.79", "xid", 7),
        (Plant("dbe", 12, gpu=0), "ecc_dbe", "gpu", 12),
        (Plant("hw_slowdown", 4, gpu=1), "clocks.hw_slowdown", "gpu", 4),
        (Plant("sag", 15, gpu=0), "gemm.sag", "gpu", 15),
        (Plant("remap_pending", 9, gpu=1), "remap", "gpu", None),
        (Plant("sbe_storm", 3, gpu=0), "ecc_sbe", "gpu", 3),
    ],
)
def test_each_planted_gpu_fault_is_named_alone_with_its_serial_and_minute(
    tmp_path: Path, plant: Plant, rule: str, kind: str, minute: int | None
) -> None:
    rec = simulated_run(tmp_path, plant)
    found, _told = judged(rec)
    assert [f["rule"] for f in found] == [rule], [f["message"] for f in found]
    f = found[0]
    serial = f"16523220{plant.gpu:05d}"
    assert f["kind"] == kind and f["serial"] == serial, f
    assert f["pci"] == f"0000:{0x17 + 0x20 * plant.gpu:02x}:00.0"
    if minute is not None:  # first seen within the interval (XIDs: within the 30-s read)
        assert minute * 60 <= f["at_s"] <= minute * 60 + 31, f


def test_an_hbm_bit_flip_is_named_with_its_bytes_and_offset(tmp_path: Path) -> None:
    rec = simulated_run(tmp_path, None, hbm_flip=True)
    found, _ = judged(rec)
    assert [f["rule"] for f in found] == ["hbm"], found
    h = found[0]["after"]
    assert h["mismatched_bytes"] == 4 and found[0]["serial"] == "1652322000001"
    assert h["first_offset"] == 2 * (1 << 18) + 1234 * 4  # buffer 2 of 1 MiB chunks... its cell
    assert int(h["first_read"], 16) ^ int(h["first_written"], 16) == 1 << 7


def test_a_port_counter_that_grows_is_named_alone(tmp_path: Path) -> None:
    rec = simulated_run(tmp_path, Plant("xid", 10**6))  # an XID never due: nothing else planted
    found, _ = judged(rec)
    assert found == []
    (tmp_path / "b").mkdir()
    rec = simulated_run(tmp_path / "b", _PortPlant(11))
    found, _ = judged(rec)
    assert [(f["rule"], f["part"]) for f in found] == [("port", "mlx5_0/1")], found
    assert found[0]["before"]["symbol_error"] == 2 and found[0]["after"]["symbol_error"] == 9
    assert 11 * 60 <= found[0]["at_s"] <= 11 * 60 + 1


class _PortPlant(Plant):
    """A port plant: the fake NVML sees no fault; the sysfs tree's counter grows."""

    def __init__(self, minute: float) -> None:
        object.__setattr__(self, "kind", "port")
        object.__setattr__(self, "minute", minute)
        object.__setattr__(self, "gpu", 0)
