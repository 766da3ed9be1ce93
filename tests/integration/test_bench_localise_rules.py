"""Localisation without hosts: schedules, the outlier rules, the parsers, the verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.bench_localise_rules import RULES
from tests.support.bench_localise_rules import node_record as _node
from tests.support.paths import FAKES
from tests.support.required import require
from validation.bench.localisation import findings
from validation.bench.node import probe

FAKE_SMI = FAKES / "fake-nvidia-smi"


def _smi_rows(config: dict, tmp_path: Path) -> list[dict]:
    """The fake nvidia-smi (real H200 output, overridden per GPU) as the probe reads it."""
    where = tmp_path / "bin"
    where.mkdir(parents=True, exist_ok=True)
    (where / "nvidia-smi").symlink_to(FAKE_SMI)
    (where / "fake-nvidia-smi.json").write_text(json.dumps(config))
    out = subprocess.run(
        [
            str(where / "nvidia-smi"),
            f"--query-gpu={probe.SMI_FIELDS}",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return probe.parse_smi(out)


def test_gpu_at_gen3_x8_is_named_by_node_and_pci_address(tmp_path: Path) -> None:
    healthy = _smi_rows({"gpus": 2}, tmp_path / "a")
    sick = _smi_rows(
        {
            "gpus": 2,
            "gpu_fields": {"1": {"pcie.link.gen.current": 3, "pcie.link.width.current": 8}},
        },
        tmp_path / "b",
    )
    assert healthy[0]["pcie_gen"] == 5 and healthy[0]["pcie_width"] == 16
    assert sick[1]["pci"] == "0000:1b:00.0" and sick[1]["pcie_width"] == 8
    found, _ = findings.judge(
        {
            "rules": RULES,
            "nodes": [_node("n1", 15, healthy), _node("n2", 15, sick), _node("n3", 15, healthy)],
        }
    )
    assert [f.check_id for f in found] == ["bench.gpu[n2 0000:1b:00.0]"]
    assert "Gen3 x8 (max Gen5 x16)" in found[0].observed and found[0].pci == "0000:1b:00.0"


def test_probe_script_runs_alone_and_prints_json() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            probe.__loader__.get_source(probe.__name__) or "",  # type: ignore[union-attr]
            "--duration",
            "0.2",
            "--engine",
            "numpy",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()[-1]
    rec = json.loads(out)
    assert rec["device"] == "cpu" and rec["units"][0]["gemm_gflops"] > 0


def test_torch_path_of_the_probe_runs_on_cpu() -> None:
    """The per-GPU code (torch GEMM, copies, the node's allreduce) on the CPU device."""
    torch = require("torch")
    fig = probe.torch_unit(torch, "cpu", 0.2, 64, 4)
    assert fig["gemm_gflops"] > 0 and fig["memcpy_gb_s"] > 0
    ar = probe.node_allreduce(2, 1 << 16, 3)
    assert ar["correct"] and ar["busbw_gb_s"] > 0 and ar["ranks"] == 2
