"""The vendors' engines of the bench: nccl-tests, fio, perftest's ib_write_bw and DCGM.

Parsers run on output captured from real runs where one could be made: all_reduce_perf
on one H200 (nccl-tests 2.19.6, tests/support/fixtures/bench/all_reduce_perf-h200-1gpu.txt; and
one run with `-J`: its JSON file and its stdout, all_reduce_perf-h200-1gpu-json.*, the
JSON's `env` list, the process's environment, emptied and its binary path shortened),
fio 3.33 here with rackcert's own command line, ib_write_bw here without an RDMA device.
No RDMA device and no DCGM exist on any machine these tests ran on: the ib_write_bw
table and the DCGM documents below follow the layouts perftest and DCGM document
(perftest's README; DCGM's nvvs JsonOutput format comment), and say so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rackcert.core.runs import RunDir
from tests.support.bench_engines import FIX
from validation import parsers
from validation.bench import perftest
from validation.bench.localisation import linkprobe
from validation.bench.node import storage
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units import nccl_tests as nccltests
from validation.bench.units.nccl_tests import run_nccl_tests
from validation.checks import REGISTRY, NodeView, load_all, run_check
from validation.expect import NodeExpect
from validation.facts.gpu import DcgmDiag
from validation.facts.system import Hostname
from validation.probes import PROBE_TIMEOUT_S, ProbeOutput, build_script

NCCL = (FIX / "all_reduce_perf-h200-1gpu.txt").read_text()


# -- nccl-tests -----------------------------------------------------------------------------
def test_all_reduce_perf_table_from_a_real_h200_run() -> None:
    out = nccltests.parse(NCCL)
    assert out["version"] == "2.19.6" and out["nccl_library"] == 22809
    assert out["devices"] == [{"rank": 0, "device": 0, "bus": "0000:00:06", "name": "NVIDIA H200"}]
    sizes = [p["size_bytes"] for p in out["points"]]
    assert sizes == [8 << i for i in range(28)]  # 8 B .. 1 GiB, -f 2
    last = out["points"][-1]
    assert (last["count"], last["time_us"], last["algbw_gbps"], last["busbw_gbps"]) == (
        268435456,
        508.58,
        2111.3,
        0.0,
    )
    assert last["in_place"] == {"time_us": 1.11, "algbw_gbps": 970702.0, "busbw_gbps": 0.0,
                                "wrong": 0}  # fmt: skip
    assert out["avg_busbw_gbps"] == 0.0 and out["out_of_bounds"] == 0 and out["correct"]


JSON_RUN = json.loads((FIX / "all_reduce_perf-h200-1gpu-json.json").read_text())
JSON_RUN_TEXT = (FIX / "all_reduce_perf-h200-1gpu-json.txt").read_text()


def test_the_json_and_the_text_of_one_real_run_say_the_same() -> None:
    """nccl-tests -J (file version 3) and the table it printed in the same run."""
    js = nccltests.parse_json(JSON_RUN, JSON_RUN_TEXT)
    tx = nccltests.parse(JSON_RUN_TEXT)
    assert js["format"] == "json" and js["json_version"] == 3 and js["version"] == "2.19.6"
    assert js["nccl_library"] == tx["nccl_library"] == 22809
    assert (
        js["devices"]
        == tx["devices"]
        == [{"rank": 0, "device": 0, "bus": "0000:00:06", "name": "NVIDIA H200"}]
    )
    assert [p["size_bytes"] for p in js["points"]] == [p["size_bytes"] for p in tx["points"]]
    for j, t in zip(js["points"], tx["points"], strict=True):
        for side_j, side_t in ((j, t), (j["in_place"], t["in_place"])):
            # the table rounds to its column (2 decimals, or %g such as "2e+06")
            assert side_j["time_us"] == pytest.approx(side_t["time_us"], rel=0.06, abs=0.01)
            assert side_j["algbw_gbps"] == pytest.approx(side_t["algbw_gbps"], rel=0.06, abs=0.01)
            assert side_j["busbw_gbps"] == side_t["busbw_gbps"] == 0.0  # one GPU
            assert side_j["wrong"] == side_t["wrong"] == 0
    assert js["points"][-1]["algbw_gbps"] == pytest.approx(2111.516291)
    assert js["avg_busbw_gbps"] == tx["avg_busbw_gbps"] == 0.0
    assert js["out_of_bounds"] == tx["out_of_bounds"] == 0 and js["correct"] and tx["correct"]
    assert "env" not in js and js["errors"] == []


def test_json_without_results_or_with_wrong_values() -> None:
    with pytest.raises(nccltests.NcclTestsParseError):
        nccltests.parse_json({"version": 3, "results": []})
    bad = json.loads(json.dumps(JSON_RUN))
    bad["results"][3]["in_place"]["nwrong"] = 2.0
    assert nccltests.parse_json(bad)["correct"] is False
    bad["results"][3]["in_place"]["bus_bw"] = "nan"  # how nccl-tests writes a NaN
    assert math.isnan(nccltests.parse_json(bad)["points"][3]["in_place"]["busbw_gbps"])


def test_figures_in_exponent_form_are_read_not_dropped() -> None:
    """A second real H200 run printed the 1 GiB in-place algbw as "2e+06"; the first parser
    dropped those rows (26 of 28 in that run's record)."""
    out = nccltests.parse((FIX / "all_reduce_perf-h200-1gpu-run2.txt").read_text())
    assert len(out["points"]) == 28 and out["unparsed_rows"] == 0 and out["correct"]
    last = out["points"][-1]
    assert last["size_bytes"] == 1 << 30 and last["in_place"]["algbw_gbps"] == 2e6
    assert last["algbw_gbps"] == 2111.8
    broken = NCCL.replace("  2111.3  ", "  21x1.3  ")
    assert not nccltests.parse(broken)["correct"] and nccltests.parse(broken)["unparsed_rows"] == 1


def test_a_wrong_value_count_makes_the_run_incorrect() -> None:
    row = "        1024           256     float     sum      -1     6.13    0.17    0.00       0"
    assert row in NCCL
    bad = NCCL.replace(row, row[:-1] + "4")
    out = nccltests.parse(bad)
    assert not out["correct"] and out["points"][7]["wrong"] == 4


def test_text_without_a_table_is_a_parse_error() -> None:
    with pytest.raises(nccltests.NcclTestsParseError, match="no all_reduce_perf table"):
        nccltests.parse("# nccl-tests version 2.19.6\nNCCL failure common.cu:1 'unhandled'\n")


def test_side_by_side_pairs_the_sizes_both_measured() -> None:
    engine = nccltests.parse(NCCL)
    sweep = [{"size_bytes": 1 << 30, "algbw_gbps": 50.0, "busbw_gbps": 0.0},
             {"size_bytes": 3, "algbw_gbps": 1.0, "busbw_gbps": 0.0}]  # fmt: skip
    (row,) = nccltests.side_by_side(engine, sweep)
    assert row == {"size_bytes": 1 << 30, "nccl_tests_algbw_gbps": 2111.3,
                   "nccl_tests_busbw_gbps": 0.0, "sweep_algbw_gbps": 50.0,
                   "sweep_busbw_gbps": 0.0}  # fmt: skip


def test_nccl_tests_skips_say_why(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    cuda, cpu = Engine("torch", "cuda", "nccl"), Engine("torch", "cpu", "gloo")
    pts = [Point(1, 1, 1)]
    assert "MPI build" in run_nccl_tests(BenchOptions(local=False), cuda, run, pts)["reason"]
    assert "no GPU" in run_nccl_tests(BenchOptions(local=True), cpu, run, pts)["reason"]
    missing = BenchOptions.of(local=True, nccl_tests=str(tmp_path / "all_reduce_perf"))
    out = run_nccl_tests(missing, cuda, run, pts)
    assert out["skipped"] and "not installed" in out["reason"] and str(tmp_path) in out["reason"]


def test_nccl_tests_command_checks_values_and_drives_local_gpus() -> None:
    argv = nccltests.command("/opt/nccl-tests/all_reduce_perf", 8, 1 << 30)
    assert argv == ["/opt/nccl-tests/all_reduce_perf", "-b", "8", "-e", "1073741824", "-f",
                    "2", "-g", "8", "-c", "1"]  # fmt: skip


# -- fio ------------------------------------------------------------------------------------
def test_fio_json_from_a_real_run_of_rackcerts_command() -> None:
    out = storage.parse_fio((FIX / "fio-randread-quick.json").read_text())
    assert out["engine"] == "fio-3.33" and out["errors"] == 0
    assert out["reads"] == 8077 and out["bytes_read"] == 8077 * 65536
    assert out["throughput_mb_s"] == pytest.approx(1037.910337)
    assert out["duration_s"] == pytest.approx(0.51, abs=1e-6)
    lat = out["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]


# -- perftest ib_write_bw -------------------------------------------------------------------
def test_ib_write_bw_without_a_device_is_a_reason_not_a_figure() -> None:
    text = (FIX / "ib_write_bw-no-device.txt").read_text()  # real, perftest 6.06 here
    with pytest.raises(perftest.PerftestParseError, match="no RDMA device"):
        perftest.parse(text)


# perftest's report layout (README); no RDMA device exists where these tests ran.
IB_TABLE = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Mtu             : 4096[B]
 Link type       : Ethernet
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             92.10              91.85              0.175190
 1048576    5000             96.40              96.38              0.011490
---------------------------------------------------------------------------------------
"""


def test_ib_write_bw_table_rows_and_header() -> None:
    out = perftest.parse(IB_TABLE)
    assert [p["size_bytes"] for p in out["points"]] == [65536, 1048576]
    assert out["best_avg_gbps"] == 96.38 and out["gbits"] is True
    assert (out["device"], out["link_type"], out["mtu"]) == ("mlx5_0", "Ethernet", "4096[B]")


def test_a_link_rows_rdma_figures_from_the_clients_output() -> None:
    """One reading for the SSH and the Slurm paths: bandwidth or its error, latency or None."""
    row = linkprobe.rdma_figures(IB_TABLE, "")
    assert (row["gbps"], row["forward_gbps"], row["latency_us"]) == (96.38, 96.38, None)
    assert "error" not in row
    row = linkprobe.rdma_figures((FIX / "ib_write_bw-no-device.txt").read_text(), "")
    assert row["gbps"] is None and "no RDMA device" in row["error"]


def test_rdma_pairs_probe_and_skip_reasons() -> None:
    assert perftest.pairs(["a"]) == []
    assert perftest.pairs(["a", "b"]) == [("a", "b")]
    assert perftest.pairs(["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("c", "a")]
    none = perftest.parse_probe("\ntool=yes\ncuda=no\n")
    assert none == {"devices": [], "tool": True, "cuda": False}
    assert "no RDMA device" in perftest.skip_reason("n1", none)
    two = perftest.parse_probe("mlx5_0 mlx5_1 \ntool=no\ncuda=no\n")
    assert two["devices"] == ["mlx5_0", "mlx5_1"]
    assert "install perftest" in perftest.skip_reason("n1", two)
    ok = perftest.parse_probe("mlx5_0 \ntool=yes\ncuda=yes\n")
    assert perftest.skip_reason("n1", ok) is None and ok["cuda"]
    assert "--use_cuda=0" in perftest.server_command("mlx5_0", True)
    assert perftest.client_command("10.0.0.2", None, False).count(" 10.0.0.2 && exit 0") == 1


# -- DCGM -----------------------------------------------------------------------------------
# DCGM 3.x layout (nvvs JsonOutput format comment) and 4.x layout (top-level "tests").
DCGM3 = """Successfully ran diagnostic for group.
{"DCGM GPU Diagnostic": {"test_categories": [
  {"category": "Deployment", "tests": [
    {"name": "Denylist", "results": [{"gpu_ids": "0", "status": "PASS"}]},
    {"name": "NVML Library", "results": [{"gpu_ids": "0", "status": "PASS"}]}]},
  {"category": "Hardware", "tests": [
    {"name": "GPU Memory", "results": [{"gpu_id": "0", "status": "FAIL",
      "warnings": [{"warning": "Found 1 uncorrectable memory error"}]}]}]}],
  "version": "3.3.9"}}"""
DCGM4 = json.dumps({"version": "4.2.3", "tests": [
    {"name": "software", "category": "Deployment",
     "results": [{"entity_group": "GPU", "entity_id": 0, "status": "pass"}]},
    {"name": "pcie", "category": "Integration",
     "results": [{"entity_group": "GPU", "entity_id": 0, "status": "warn",
                  "warnings": [{"message": "PCIe replay count 3"}]}]}]})  # fmt: skip


def test_dcgm_json_both_layouts() -> None:
    three = parsers.dcgm_diag_json(DCGM3)
    assert three["version"] == "3.3.9"
    assert [(r["test"], r["status"]) for r in three["results"]] == [
        ("Denylist", "pass"), ("NVML Library", "pass"), ("GPU Memory", "fail")
    ]  # fmt: skip
    assert three["results"][2]["warnings"] == ["Found 1 uncorrectable memory error"]
    four = parsers.dcgm_diag_json(DCGM4)
    assert [(r["test"], r["entity"], r["status"]) for r in four["results"]] == [
        ("software", "0", "pass"), ("pcie", "0", "warn")
    ]  # fmt: skip
    with pytest.raises(parsers.ParseError):
        parsers.dcgm_diag_json("Error: unable to connect to host engine")


def _dcgm(out: ProbeOutput, **kw) -> object:
    load_all()
    expect = NodeExpect(node="n1", address="10.0.0.1", gpus=1, **kw)
    return run_check(REGISTRY["gpu.dcgm.diag"], NodeView(expect, {"dcgm_diag": out}))


def test_dcgm_check_skips_fails_and_passes() -> None:
    # The H200 machine has no dcgmi (as captured): a skip with its reason.
    missing = _dcgm(ProbeOutput("dcgm_diag", 127, "", missing="dcgmi"))
    assert missing.status.value == "skip" and "dcgmi not found" in missing.reason
    bad = _dcgm(ProbeOutput("dcgm_diag", 226, DCGM3))
    assert bad.status.value == "fail" and "GPU Memory on 0" in bad.observed
    warned = _dcgm(ProbeOutput("dcgm_diag", 0, DCGM4), dcgm_diag_level=2)
    assert warned.status.value == "pass" and "1 warning(s): pcie" in warned.observed
    assert "level 2" in warned.observed
    off = _dcgm(ProbeOutput("dcgm_diag", 0, ""), dcgm_diag_level=0)
    assert off.status.value == "skip" and "dcgm_diag_level is 0" in off.reason
    broken = _dcgm(ProbeOutput("dcgm_diag", 1, "Error: unable to connect to host engine"))
    assert broken.status.value == "fail" and "unable to connect" in broken.reason


def test_dcgm_probe_has_its_own_time_limit_then_the_common_one_again() -> None:
    expect = NodeExpect(node="n1", address="10.0.0.1", gpus=1, dcgm_diag_level=3)
    script = build_script([DcgmDiag, Hostname], expect)
    assert "dcgmi diag -r 3 -j" in script
    own, common = (
        script.index("timeout -k 2 3600"),
        script.rindex(f"timeout -k 2 {PROBE_TIMEOUT_S}"),
    )
    assert own < script.index("dcgmi diag") < common < script.index("uname -n")
