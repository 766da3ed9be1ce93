"""Bench arithmetic and planning, without launching anything: nccl-tests' definitions,
weak-scaling speedup/efficiency, verdict thresholds, launch command lines, CLI input errors."""

from __future__ import annotations

from validation.bench import launch
from validation.bench.node import resnet_loop


def test_seeded_fused_sgd_matches_unfused_when_the_first_step_overflows() -> None:
    """Fused SGD + GradScaler skipping step 1 must not leave garbage momentum (NaN on H200)."""
    import torch

    def trajectory(fused: bool) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4)
        kw = {"fused": True} if fused else {"foreach": True}
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, **kw)
        if fused:
            resnet_loop.seed_momentum(opt)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)  # step 1 overflows
        gen = torch.Generator().manual_seed(1)
        for _ in range(4):
            opt.zero_grad()
            loss = model(torch.randn(2, 8, generator=gen)).pow(2).sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert scaler.get_scale() < 2.0**127  # the overflow happened and was skipped
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(trajectory(True), trajectory(False), strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)


def test_the_horovod_ssh_wrapper_drops_horovods_options_and_pins_the_enrolled_keys(tmp_path):
    """The real OpenSSH client resolves the wrapper's argv (`ssh -G` prints the options it
    would use, connecting nowhere): Horovod 0.28's `-o StrictHostKeyChecking=no` (and a
    known_hosts of its own, any spelling) is gone, the shipped file is the one trusted."""
    import subprocess

    from rackcert.core.ssh_target import hop_options

    where = tmp_path / "w"
    where.mkdir()
    kh = where / "known_hosts"
    (where / "ssh").write_text(launch.ssh_wrapper(str(where), hop_options(str(kh))))
    (where / "ssh").chmod(0o700)
    horovod = "ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no node2 -p 2222"
    for argv in (
        [*horovod.split()[1:], "-G"],
        ["-oStrictHostKeyChecking=no", "-o", "userknownhostsfile=/dev/null", "-G", "node2"],
    ):
        done = subprocess.run(
            [str(where / "ssh"), *argv],
            capture_output=True, text=True, timeout=30, check=True,
            env={"PATH": f"{where}:/usr/bin:/bin"},
        )  # fmt: skip
        seen = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
        assert seen["stricthostkeychecking"] == "true", argv
        assert seen["userknownhostsfile"] == str(kh) and seen["globalknownhostsfile"] == "/dev/null"
        assert seen["batchmode"] == "yes" and seen["hostname"] == "node2"
    # Options after `--` belong to the remote command: left alone.
    done = subprocess.run(
        ["sh", "-x", str(where / "ssh"), "-G", "--", "n", "-o", "StrictHostKeyChecking=no"],
        capture_output=True, text=True, timeout=30, check=False,
        env={"PATH": f"{where}:/usr/bin:/bin"},
    )  # fmt: skip
    final = [ln for ln in done.stderr.splitlines() if ln.startswith("+ exec ssh")]
    assert final and final[-1].endswith("-G -- n -o StrictHostKeyChecking=no"), done.stderr


def test_launch_children_never_get_this_processes_whole_environment(tmp_path, monkeypatch):
    """Before: execute() passed os.environ to every child (vCenter password included)."""
    monkeypatch.setenv("RACKCERT_VCENTER_PASSWORD", "vc-Secret-9921")
    monkeypatch.setenv("RACKCERT_BECOME_PASSWORD", "become-Secret-1182")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    job = launch.here("env", [["env"]], env={"PYTHONPATH": "/src"})
    (text,) = launch.execute_text(job, tmp_path / "env.log", timeout_s=30)
    assert "vc-Secret-9921" not in text and "become-Secret-1182" not in text
    assert "NCCL_SOCKET_IFNAME=eth0" in text and "PYTHONPATH=/src" in text and "PATH=" in text


def test_worker_wheel_installs_offline_and_runs_in_a_fresh_environment(tmp_path) -> None:
    import subprocess
    import sys
    import zipfile

    from rackcert.configure.worker_wheel import MODULES, build_worker_wheel

    wheel = build_worker_wheel(tmp_path / "w")
    again = build_worker_wheel(tmp_path / "w2")
    assert wheel.read_bytes() == again.read_bytes()  # deterministic
    names = zipfile.ZipFile(wheel).namelist()
    assert set(MODULES) <= set(names) and not any(n.startswith("rackcert/") for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
           "--no-index", "--no-deps", "-q", str(wheel)]  # fmt: skip
    subprocess.run(pip, check=True, capture_output=True)
    worker_help = [str(venv / "bin" / "python"), "-m", "validation.bench.node.worker", "--help"]
    out = subprocess.run(
        worker_help, capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin"}
    )
    assert out.returncode == 0 and "--tasks" in out.stdout, out.stderr
