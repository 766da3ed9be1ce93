"""Against govmomi's stock simulator (no rackcert extension): plan says why, per host."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rackcert.core.paths import REPO_ROOT
from rackcert.lab import twin
from tests.support.vsphere_helpers import cli

STOCK = REPO_ROOT / "twin" / "stock"
HOSTS = ["DC0_C0_H0", "DC0_C0_H1"]  # the stock VPX inventory's cluster hosts


@pytest.fixture(scope="module")
def stock_binary() -> Path:
    digest = hashlib.sha256((STOCK / "main.go").read_bytes()).hexdigest()[:16]
    target = twin.cache_dir() / f"stock-{digest}" / "stock-vcsim"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        env = os.environ | {"GOPATH": twin.GOPATH, "GO111MODULE": "off"}
        tmp = target.with_suffix(".tmp")
        subprocess.run(["go", "build", "-o", str(tmp), "."], cwd=STOCK, env=env, check=True)
        os.replace(tmp, target)
    return target


class _Lab:
    def __init__(self, spec_path: Path, runs_dir: Path) -> None:
        self.spec_path, self.runs_dir = spec_path, runs_dir


def test_plan_on_a_stock_vcsim_says_no_gpu_once_per_host(stock_binary, tmp_path, capsys):
    password = tmp_path / "password"
    password.write_text("stock-secret\n")
    proc = subprocess.Popen(
        [str(stock_binary), "-user", "rackcert", "-password-file", str(password)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        address = json.loads(proc.stdout.readline())["url"]
        data = yaml.safe_load((REPO_ROOT / "inventories" / "lab.yaml").read_text())
        data["vcenter"].update(
            host="127.0.0.1",
            port=int(address.rsplit(":", 1)[1]),
            protocol="http",
            password_file=str(password),
            datacenter="DC0",
            cluster="DC0_C0",
        )
        data["vcenter"].pop("tls", None)
        for host, name in zip(data["hosts"], HOSTS, strict=True):
            host["address"] = name
        spec = tmp_path / "stock.yaml"
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        lab = _Lab(spec, tmp_path / "runs")
        code, out, err = cli(lab, capsys, "plan", str(spec), "--json")
        assert code == 0, err
        assert "Traceback" not in out + err
        actions = json.loads(out)["actions"]
        assert [(a["kind"], a["target"]) for a in actions] == [("host.gpus", h) for h in HOSTS]
        assert all(a["change"] == "no passthrough-capable GPU on this host" for a in actions)
        code, out, err = cli(lab, capsys, "plan", str(spec))
        assert code == 0 and "Traceback" not in out + err
        assert out.count("host.gpus") == len(HOSTS)  # one row per host
    finally:
        proc.terminate()
        proc.wait(timeout=10)
