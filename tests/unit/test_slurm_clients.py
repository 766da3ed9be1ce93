"""Only rackcert.core.slurm runs Slurm's clients; only the launch transport starts srun.

import-linter judges imports, not the programs a module starts, so this test reads the
house's source for argv: a call whose first argument is a Slurm client's name
(`run_client("scontrol", ...)`, `subprocess.run(["sinfo", ...])`) or a list or tuple that
starts with one. Allowed:
- rackcert/core/slurm/client.py: scontrol, squeue and sinfo, and the reading of their output,
  for the health check, localisation's drain, the roll and the lab;
- validation/bench/transport.py: srun, the launch transport (SrunTransport) that starts the
  bench's job steps and localisation's rounds; its output is the steps' own.
A shell line a task runs on a node inside a step (validation/bench/slurm_launch.py asks
`scontrol show hostnames` of its own step's node list) is the task's, not the controller's:
it is no argv here.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rackcert", "provision", "validation")
TOOLS = {"scontrol", "sinfo", "squeue", "sbatch", "srun", "salloc", "scancel", "sacct"}
ALLOWED = {"rackcert/core/slurm/client.py", "validation/bench/transport.py"}


def _is_tool(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.rsplit("/", 1)[-1] in TOOLS
    )


def slurm_argv(source: str) -> list[int]:
    """Lines of `source` that start a Slurm client: a call or an argv display led by one."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        lead = None
        if isinstance(node, ast.Call) and node.args:
            lead = node.args[0]
        elif isinstance(node, ast.List | ast.Tuple) and node.elts:
            lead = node.elts[0]
        if _is_tool(lead):
            found.add(node.lineno)
    return sorted(found)


def test_the_reader_finds_a_planted_client_call() -> None:
    planted = (
        "import subprocess\n"
        "def f(node):\n"
        "    subprocess.run(['scontrol', 'show', 'node', node])\n"
        "    run_client('sinfo', '-N')\n"
        "    ok = opts.launcher == 'srun'\n"
        "    return ('auto', 'srun')\n"
    )
    assert slurm_argv(planted) == [3, 4]


def test_only_the_slurm_module_and_the_launch_transport_start_slurm_clients() -> None:
    seen: dict[str, list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = slurm_argv(path.read_text())
            if lines:
                seen[str(path.relative_to(ROOT))] = lines
    assert set(seen) - ALLOWED == set(), seen
    assert set(seen) == ALLOWED  # each allowed module does start one: the list is not stale
