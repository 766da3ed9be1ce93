"""rackcert under Slurm, the parts that need no running Slurm: the spec's slurm block, the
slurm.conf lines, the srun command line, the placement read from the tasks' lines, the
health check's reason and state parsing. The real-Slurm tests are
tests/integration/test_slurm_lab.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rackcert.core.ansible_vars import spec_group_vars
from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.slurm.client import node_reason
from rackcert.core.spec_loader import load_spec
from tests.support.slurm_conf import LAB
from tests.support.slurm_conf import slurm_spec as _spec
from validation.bench import slurm_launch
from validation.healthcheck import _last_own_drain, append_record, reason_for


def test_role_variables_come_from_the_block(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path)).spec
    got = spec_group_vars(spec)
    assert got["slurm_node_enabled"] is True
    assert got["slurm_node_munge_key_file"] == "/etc/rackcert/munge.key"
    assert got["slurm_node_conf_file"] == ""  # configless
    assert got["slurm_node_gres_type"] == "a100"
    assert spec_group_vars(load_spec(LAB).spec)["slurm_node_enabled"] is False


def test_srun_horovod_is_an_mpi_direct_launch() -> None:
    """Horovod under srun as DeepOps runs it: --mpi=pmix starts every rank, the ranks keep
    the step's PMIx variables (no `env -i`), MPI controller and operations, Open MPI allowed
    to run as root and kept on the data interface."""
    launch = slurm_launch.build(
        "2 node(s)", nodes=2, tasks_per_node=1, gpus=False, python="/opt/rackcert/venv/bin/python",
        worker_args=["--tasks", "allreduce"], partition="lab", reservation=None, immediate_s=5,
        client_conf=None, backend="horovod", interface="eth0",
    )  # fmt: skip
    (cmd,) = launch.commands
    assert cmd[:2] == ["srun", "--mpi=pmix"]
    script = cmd[-1]
    assert "exec env -i " not in script and "exec env HOME=" in script
    for pair in (
        "HOROVOD_CONTROLLER=mpi",
        "HOROVOD_CPU_OPERATIONS=mpi",
        "OMPI_ALLOW_RUN_AS_ROOT=1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "OMPI_MCA_btl_tcp_if_include=eth0",
    ):
        assert f" {pair} " in script, pair  # fmt: skip
    assert "-m validation.bench.node.worker --backend horovod --tasks allreduce" in script
    torch = slurm_launch.build(
        "2 node(s)", nodes=2, tasks_per_node=1, gpus=False, python="/p/python",
        worker_args=[], partition="lab", reservation=None, immediate_s=5, client_conf=None,
    )  # fmt: skip
    assert "exec env -i " in torch.commands[0][-1] and "HOROVOD_" not in torch.commands[0][-1]


def _failed(check: str, observed: str) -> CheckResult:
    return CheckResult(
        id=check, node="n1", severity=Severity.error, status=Status.failed,
        observed=observed, expected="x", reason="r",
    )  # fmt: skip


def test_drain_reason_and_own_drain_record(tmp_path: Path) -> None:
    reason = reason_for([_failed("gpu.count", "1 GPU(s):\n A100"), _failed("gpu.xid", "79")])
    assert reason == "rackcert: gpu.count: 1 GPU(s): A100 (+1 more)"
    line = f"NodeName=n1 State=IDLE+DRAIN Reason={reason} [root@2026-12-03T15:00:00] Comment=x"
    assert node_reason(line) == reason
    odd = "rackcert: gpu.pcie.link: gen=3 width=8 ['x']"
    assert node_reason(f"NodeName=n1 Reason={odd} [slurm@2026-12-03T15:00:00]\n") == odd
    record = tmp_path / "h.jsonl"
    assert _last_own_drain(record, "n1") is None
    append_record(record, {"node": "n1", "action": "drain", "reason": reason})
    append_record(record, {"node": "n2", "action": "drain", "reason": "rackcert: other"})
    assert _last_own_drain(record, "n1") == reason
    append_record(record, {"node": "n1", "action": "resume", "reason": reason})
    assert _last_own_drain(record, "n1") is None


def test_a_result_line_srun_cut_into_labelled_pieces_is_joined_back() -> None:
    """srun --label forwards a long line in 1024-byte pieces, each on its own labelled line
    (seen with Slurm 22.05.8); other tasks' lines may come between them."""
    from validation.bench.launch import MARKER, parse_result

    result = {
        "world_size": 2,
        "points": [{"size_bytes": 2**i, "busbw": 0.1 * i} for i in range(90)],
    }
    line = MARKER + json.dumps(result)
    assert len(line) > 3000
    pieces = [line[i : i + 1024] for i in range(0, len(line), 1024)]
    text = "".join(f"0: {p}\n" for p in pieces) + "0: RACKCERT_DONE 0\n"
    assert parse_result(text) == result
    between = (
        "0: " + pieces[0] + "\n1: RACKCERT_DONE 1\n" + "".join(f"0: {p}\n" for p in pieces[1:])
    )
    assert parse_result(between) == result
    cut = "0: " + pieces[0] + "\nsrun: error: node2: task 1: Killed\n"
    with pytest.raises(ValueError):  # a result that never came whole is no figure
        parse_result(cut)
