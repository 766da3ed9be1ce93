"""Fixtures for the validate tests: a fake GPU tool directory per node.

    def test_x(fake_gpu_tools):
        path = fake_gpu_tools({"node1": {"driver": "535.54.03"}, "node2": {}})
        # rackcert validate ... --tool-path {path}   ({node} expands per node)

Each node gets `<tmp>/<node>/nvidia-smi`, a link to tests/support/fakes/fake-nvidia-smi
(built from real H200 output), plus that node's fake-nvidia-smi.json; a config
with an "ofed" dict also links ofed_info, ibdev2netdev and mlxconfig to
tests/support/fakes/fake-ofed-tools, with the dict as its knobs. The links point at a copy of
tests/support/fakes and tests/support/fixtures/h200 in the test's tmp directory: the SSH test hosts
do
not see this checkout (rackcert.lab.sshhosts hides it), /tmp they do.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

FAKE_SMI = Path(__file__).resolve().parent.parent / "fakes" / "fake-nvidia-smi"
FAKE_OFED = Path(__file__).resolve().parent.parent / "fakes" / "fake-ofed-tools"
H200_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "h200"


@pytest.fixture
def fake_gpu_tools(tmp_path: Path) -> Callable[[dict[str, dict]], str]:
    copy = tmp_path / "fakes-copy"  # same layout: fakes/ beside fixtures/h200
    if not copy.exists():
        shutil.copytree(FAKE_SMI.parent, copy / "fakes", symlinks=True)
        shutil.copytree(H200_FIXTURES, copy / "fixtures" / "h200")
    smi, ofed_tools = copy / "fakes" / FAKE_SMI.name, copy / "fakes" / FAKE_OFED.name

    def make(configs: dict[str, dict]) -> str:
        root = tmp_path / "fake-tools"
        for node, cfg in configs.items():
            d = root / node
            d.mkdir(parents=True, exist_ok=True)
            link = d / "nvidia-smi"
            if not link.exists():
                link.symlink_to(smi)
            ofed = cfg.pop("ofed", None)
            (d / "fake-nvidia-smi.json").write_text(json.dumps(cfg))
            if ofed is not None:  # {"PORT_STATE": "Down", ...}: the OFED fakes too
                for tool in ("ofed_info", "ibdev2netdev", "mlxconfig"):
                    if not (d / tool).exists():
                        (d / tool).symlink_to(ofed_tools)
                env = "".join(f"{k}='{v}'\n" for k, v in ofed.items())
                (d / "fake-ofed.env").write_text(env)
        return str(root / "{node}")

    return make
