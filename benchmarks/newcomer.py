"""A newcomer's first minutes: the README's first command on a fresh clone, step by step.

Clones this checkout into a temporary folder and runs `.ci/setup && .venv/bin/rackcert demo`
there as a newcomer would, with every cache that set-up fills empty: a fresh HOME (pip's
cache, Go's build cache, rackcert's twin and Horovod wheel caches), and fresh folders for the
judges' virtual environment and the lab's DL stack. Debian packages already on the machine
stay installed (removing them would break whatever else runs here), so the apt line shows
only what was missing.

It prints set-up's steps (from the `==> step [N s]` lines set-up prints), the demo's stages
(from its closing summary), whether the demo ran with or without Horovod (set-up no longer
waits for Horovod's source build), and the time to the first verdict; then it waits for what
set-up left running in the background (Horovod's build and install, the test-only tools; they
ran beside the demo, niced) and says when it was done, counted from the end of set-up: what
the README's second command would wait for.

    .venv/bin/python benchmarks/newcomer.py                     # setup + demo
    .venv/bin/python benchmarks/newcomer.py --json out.json --keep
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackcert.lab import lifetime  # noqa: E402

_STEP = re.compile(r"^==> (?P<what>.+?) \[(?P<at>\d+) s\]\s*$")
_STAGE = re.compile(
    r"^\s+(?P<stage>plan|provision|configure|validate|bench|report)\s+(?P<s>[\d.]+) s"
)


def steps(setup_output: str, total: float) -> list[tuple[str, float]]:
    """Set-up's `==> what [N s]` marks -> (what, seconds until the next mark)."""
    marks = [(m["what"], float(m["at"])) for m in map(_STEP.match, setup_output.splitlines()) if m]
    ends = [at for _, at in marks[1:]] + [total]
    return [(what, end - at) for (what, at), end in zip(marks, ends, strict=True)]


def stages(demo_output: str) -> list[tuple[str, float]]:
    """The demo summary's `  stage   12.3 s  ok` lines."""
    tail = demo_output[demo_output.rfind("summary of run") :]
    return [(m["stage"], float(m["s"])) for m in map(_STAGE.match, tail.splitlines()) if m]


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int, float, str]:
    """Run `cmd`, echoing its lines, keeping them in `log`; (exit, seconds, output)."""
    t0 = time.monotonic()
    lines: list[str] = []
    with (
        subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc,
        log.open("w") as out,
    ):
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                lines.append(line)
                out.write(line)
                print(f"  | {line}", end="", flush=True)
        except BaseException:  # a signal here: the demo stops its own lab, given the chance
            lifetime.stop_child(proc, grace_s=30)
            raise
    return proc.returncode, time.monotonic() - t0, "".join(lines)


def test_tools(clone: Path, setup_end: float, limit_s: float = 900.0) -> dict[str, Any]:
    """Wait for set-up's background job (Horovod, the test-only tools) as the test session does
    (.venv/log/test-tools.rc); its exit status and when it ended, in seconds after set-up."""
    rc_file = clone / ".venv" / "log" / "test-tools.rc"
    deadline = time.monotonic() + limit_s
    while not rc_file.is_file() and time.monotonic() < deadline:
        time.sleep(1.0)
    if not rc_file.is_file():
        return {"rc": None, "note": f"not done {limit_s:.0f} s later"}
    ended = rc_file.stat().st_mtime - (time.time() - time.monotonic())  # on the monotonic clock
    return {"rc": int(rc_file.read_text().strip() or -1), "after_setup_s": round(ended - setup_end)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", type=Path, help="Also write the figures here")
    ap.add_argument("--keep", action="store_true", help="Keep the clone and its caches")
    ap.add_argument("--no-demo", action="store_true", help="Set-up only")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("error: run as root (set-up installs packages; the lab uses network namespaces)")
        return 2
    work = Path(tempfile.mkdtemp(prefix="rackcert-newcomer-"))
    clone, home = work / "rackcert", work / "home"
    home.mkdir()
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "GO"))}
    env.update(
        HOME=str(home),
        RACKCERT_JUDGES_VENV=str(work / "judges"),
        RACKCERT_ESXCLI_VENV=str(work / "esxcli"),
        RACKCERT_LAB_DL_SITE=str(work / "dl-site"),
    )
    result: dict[str, Any] = {"clone": str(clone)}
    print(f"fresh clone in {clone}; empty caches under {home}")
    rc, setup_s, out = timed(["bash", ".ci/setup"], clone, env, work / "setup.log")
    setup_end = time.monotonic()
    result.update(setup_exit=rc, setup_s=round(setup_s, 1), setup_steps=steps(out, setup_s))
    if rc == 0 and not args.no_demo:
        rc, demo_s, out = timed([".venv/bin/rackcert", "demo"], clone, env, work / "demo.log")
        result.update(demo_exit=rc, demo_s=round(demo_s, 1), demo_stages=stages(out))
        result["demo_horovod"] = (
            "left out (not built yet)" if "not run: the Horovod" in out else "run"
        )
    if result["setup_exit"] == 0:
        result["test_tools"] = test_tools(clone, setup_end)
    print("\nset-up step | s")
    for what, s in result["setup_steps"]:
        print(f"{what[:70]} | {s:.0f}")
    print(f"set-up total | {result['setup_s']:.0f} (exit {result['setup_exit']})")
    if "demo_s" in result:
        print("\ndemo stage | s")
        for stage, s in result["demo_stages"]:
            print(f"{stage} | {s:.1f}")
        print(f"demo total | {result['demo_s']:.0f} (exit {result['demo_exit']}; 1 = FAIL verdict)")
        print(f"demo's Horovod path | {result['demo_horovod']}")
        first = result["setup_s"] + result["demo_s"]
        print(f"\nfresh clone to the first verdict: {first:.0f} s ({first / 60:.1f} min)")
    if "test_tools" in result:
        tools = result["test_tools"]
        print(f"set-up's background (Horovod, test-only tools): exit {tools['rc']}, done", end=" ")
        print(tools.get("note") or f"{tools['after_setup_s']} s after set-up ended")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if result["setup_exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/newcomer.py", main))
