"""Fixtures for the validate tests: a fake GPU tool directory per node.

    def test_x(fake_gpu_tools):
        path = fake_gpu_tools({"node1": {"driver": "535.54.03"}, "node2": {}})
        # rackcert validate ... --tool-path {path}   ({node} expands per node)

Each node gets `<tmp>/<node>/nvidia-smi`, a link to tests/fakes/fake-nvidia-smi
(built from real H200 output), plus that node's fake-nvidia-smi.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

FAKE_SMI = Path(__file__).resolve().parent.parent / "fakes" / "fake-nvidia-smi"
H200_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "h200"


@pytest.fixture
def fake_gpu_tools(tmp_path: Path) -> Callable[[dict[str, dict]], str]:
    def make(configs: dict[str, dict]) -> str:
        root = tmp_path / "fake-tools"
        for node, cfg in configs.items():
            d = root / node
            d.mkdir(parents=True, exist_ok=True)
            link = d / "nvidia-smi"
            if not link.exists():
                link.symlink_to(FAKE_SMI)
            (d / "fake-nvidia-smi.json").write_text(json.dumps(cfg))
        return str(root / "{node}")

    return make
