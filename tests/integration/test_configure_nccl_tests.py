"""The nccl_tests role for real on two SSH test hosts (CPU only, no GPU driver).

One test, three configure runs (tag nccl_tests only, ~10 s each): the pinned tarball's
sha256 is refused when it differs (before anything reaches a node), a node without CUDA's
compiler is skipped with the reason in configure.json, a node whose PATH already has
all_reduce_perf is left alone, and a second run says the same. The build itself needs
nccl-tests' source, which the tests cannot fetch: docs/evidence/h200-nccl-tests-role.sh
runs it on a GPU machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from tests.support.plugins.configure import spec_for_hosts

FAKE_ON_PATH = "#!/bin/sh\necho '# nccl-tests version 0.0.0-on-path'\n"


def _tarball(path: Path) -> str:
    """A small tarball standing for the pinned source (the role never builds it here)."""
    with tarfile.open(path, "w:gz") as tar:
        data = b"nccl-tests stand-in\n"
        info = tarfile.TarInfo("nccl-tests-9.9.9/README")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _outcomes(run: RunDir) -> dict[str, dict]:
    record = json.loads((run.path / "configure.json").read_text())
    return {name: h["outcomes"].get("nccl_tests") for name, h in record["data"]["hosts"].items()}


def test_nccl_tests_role_refuses_a_wrong_pin_skips_without_cuda_and_leaves_path(
    ssh_hosts, tmp_path: Path
) -> None:
    h1, h2 = ssh_hosts(["node1", "node2"])
    for h in (h1, h2):
        # CPU test hosts without CUDA: hide a toolkit the machine's image may carry (a
        # tmpfs over it in the host's own mount namespace; the machine keeps its own).
        out = h.exec(["sh", "-c", "for d in /usr/local/cuda-*; do [ -d \"$d\" ] &&"
                      " mount -t tmpfs -o size=1m none \"$d\"; done; rm -f /usr/local/bin/nvcc;"
                      " ! command -v nvcc"])  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
    h2.path("/usr/local/bin/all_reduce_perf").write_text(FAKE_ON_PATH)
    h2.path("/usr/local/bin/all_reduce_perf").chmod(0o755)
    tarball = tmp_path / "nccl-tests-9.9.9.tar.gz"
    digest = _tarball(tarball)
    runs = tmp_path / "runs"

    def run_with(sha256: str, name: str) -> tuple[RunDir, object]:
        source = {"path": str(tarball), "sha256": sha256, "version": "9.9.9"}
        loaded = spec_for_hosts([h1, h2], tmp_path / name, sources={"nccl_tests": source})
        run = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
        return run, configure(loaded, run, tags=["nccl_tests"])

    # A wrong pin: refused on the controller, one line naming the pin; nothing copied. The
    # file's own digest is nowhere (the path is the spec's: it could name a password file).
    wrong = "0" * 64
    run, refused = run_with(wrong, "wrong")
    assert refused.status == "failed" and refused.data.totals.failed == 2, refused.data.totals
    assert digest not in refused.error and wrong in refused.error, refused.error
    kept = [
        p for p in run.path.rglob("*") if p.is_file() and digest in p.read_text(errors="ignore")
    ]
    assert kept == [], kept
    assert "\n" not in refused.error and "not unpacked" in refused.error
    for h in (h1, h2):
        assert not h.path("/opt/rackcert/nccl-tests-9.9.9").exists()

    # The right pin: node1 has no nvcc (skipped, said why), node2 keeps its own binary.
    for attempt in ("first", "second"):
        run, result = run_with(digest.upper(), attempt)
        assert result.status == "ok", result.error
        got = _outcomes(run)
        assert got["node1"]["status"] == "skipped", got
        assert "no CUDA compiler (nvcc)" in got["node1"]["detail"]
        assert got["node2"] == {
            "status": "found",
            "binary": "/usr/local/bin/all_reduce_perf",
            "detail": "all_reduce_perf is on PATH (/usr/local/bin/all_reduce_perf): left as it is",
        }
        assert result.data.totals.changed == 0, [
            h.changed_tasks for h in result.data.hosts.values()
        ]
    for h in (h1, h2):
        assert not h.path("/opt/rackcert/nccl-tests").exists()
        assert not h.path("/opt/rackcert/nccl-tests-9.9.9").exists()
    assert h2.path("/usr/local/bin/all_reduce_perf").read_text() == FAKE_ON_PATH
