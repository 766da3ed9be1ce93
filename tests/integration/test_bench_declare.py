"""A benchmark's options, declared once in its unit's file, read alike by BenchOptions and the
worker (validation/bench/node/declare.py); a typed result's strings cut in a copy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rackcert.core.errors import InputError
from tests.support.bench_declare import CPU
from validation.bench.options import BenchOptions
from validation.bench.orchestrate import worker_args

ROOT = Path(__file__).resolve().parents[2]


def test_a_choice_is_refused_by_the_options_and_by_the_worker() -> None:
    with pytest.raises(InputError, match=r"^--precision 'fp8': choose one of fp16, bf16, fp32$"):
        BenchOptions.of(precision="fp8")
    with pytest.raises(InputError, match=r"^--batch 0: want at least 1$"):
        BenchOptions.of(batch=0)
    with pytest.raises(InputError, match="bench option 'bogus': no benchmark declares it"):
        BenchOptions.of(bogus=1)
    # the worker holds the declaration it was sent: a value outside it is argparse's one line
    args = worker_args(BenchOptions.of(precision="bf16"), CPU, ["resnet"])
    args[args.index("bf16")] = "fp8"
    proc = subprocess.run(
        [sys.executable, "-m", "validation.bench.node.worker", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "invalid choice: 'fp8'" in proc.stderr, proc.stderr
