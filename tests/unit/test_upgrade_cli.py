"""`rackcert upgrade SPEC --plan` on the lab's spec against a certified run directory: the
plan printed, the refusals as one line and exit 2, nothing written. The roll itself, and the
rollback's wiring (the node pinned to what its forward configure run recorded), run with the
real roles in tests/integration/test_upgrade_lab.py."""

from __future__ import annotations

import json

import pytest

from rackcert.cli import main
from tests.support.plugins.upgrade_cli import new_spec as _new_spec


def test_plan_shows_layers_order_waves_and_steps(tmp_path, certified, capsys):
    spec = _new_spec(tmp_path, "470.141.03")
    before = sorted(p.name for p in (certified / "lab").iterdir())
    assert main(["upgrade", str(spec), "--plan", "--runs-dir", str(certified)]) == 0
    out = capsys.readouterr().out
    assert "host: esxi 7.0.3 -> 7.0.3u on lab-esx01, lab-esx02" in out
    assert "guest: nvidia_driver 470.82.01 -> 470.141.03" in out
    assert "wave 1: lab-esx01: lab-node1\nwave 2: lab-esx02: lab-node2" in out
    assert "the roll ASKS before taking each node out" in out
    assert "lab-node1: ask -> drain -> measure before -> shutdown guest -> host maintenance" in out
    assert "  measure before: validate and localisation's per-node stage ran on the node" in out
    assert "start: run " in out and ", verdict PASS" in out
    assert sorted(p.name for p in (certified / "lab").iterdir()) == before  # nothing written
    assert main(["upgrade", str(spec), "--plan", "--json", "--runs-dir", str(certified)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["waves"] == [["lab-esx01"], ["lab-esx02"]] and plan["refused"] == []


def test_an_uncertified_driver_is_refused_in_one_line_unless_allowed(tmp_path, certified, capsys):
    spec = _new_spec(tmp_path, "535.154.05", esxi=None)
    assert main(["upgrade", str(spec), "--plan", "--runs-dir", str(certified)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: upgrade refused: nvidia_driver 535.154.05 is not in")
    assert "\n" not in err
    code = main(
        ["upgrade", str(spec), "--plan", "--allow-uncertified", "--runs-dir", str(certified)]
    )
    assert code == 0
    assert "uncertified (allowed): nvidia_driver 535.154.05" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-unavailable", "0"], "--max-unavailable '0': at least 1 node"),
        (["--max-unavailable", "10%"], "--max-unavailable allows 0 there"),
        (["--order", "lab-node7"], "--order names lab-node7, not a node of this rack"),
        (["--drain-policy", "later"], "--drain-policy 'later': wait, skip or stop"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, certified, capsys, args, message):
    spec = _new_spec(tmp_path, "470.141.03")
    assert main(["upgrade", str(spec), "--plan", "--runs-dir", str(certified), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_no_certified_run_is_one_line(tmp_path, capsys):
    spec = _new_spec(tmp_path, "470.141.03")
    assert main(["upgrade", str(spec), "--plan", "--runs-dir", str(tmp_path / "none")]) == 2
    assert "no certified run of rack lab" in capsys.readouterr().err
