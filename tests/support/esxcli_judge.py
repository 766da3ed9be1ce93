"""VMware's own esxcli (PyPI's vmware-esxcli), pointed at the rack twin through vCenter.

vmware-esxcli bundles its own pyVmomi, so it lives in its own virtual environment
(.ci/setup.d/26-esxcli-judge.sh installs it; RACKCERT_ESXCLI_VENV overrides the place). A
missing judge fails the test: CI installs it, a test never does.

`esxcli_batch` runs many commands against one host in one esxcli process, the client's own
batch mode (`--debug --batch FILE`, one command per line, `continueOnError`), with its JSON
formatter: each answer is the command's result as esxcli decoded it from the twin's
ExecuteSoap response, or the error line esxcli printed. It connects the way an operator does,
`-r https://127.0.0.1:PORT/sdk -t <twin CA> -u USER -h <host as vCenter knows it>`, the
password in VI_PASSWORD (never on the command line).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ESXCLI_VENV = Path(os.environ.get("RACKCERT_ESXCLI_VENV", "/opt/rackcert-lab/esxcli"))
SEPARATOR = "@@rackcert-esxcli-answer@@"

# The namespaces the twin serves, one read command each (the set commands are driven apart).
READS = {
    "version": "system version get",
    "kernel": "system settings kernel list",
    "pci": "hardware pci list",
    "passthru": "hardware pci pcipassthru list",
    "graphics": "graphics device list",
    "nics": "network nic list",
    "rdma": "rdma device list",
    "vaai": "storage core device vaai status get",
    "vibs": "software vib list",
}


@dataclass
class Answer:
    """One command's answer: the decoded result, or the error esxcli printed."""

    command: str
    value: Any = None
    error: str = ""


def esxcli_path() -> Path:
    exe = ESXCLI_VENV / "bin" / "esxcli"
    assert exe.is_file(), (
        f"VMware's esxcli is not installed ({ESXCLI_VENV}): run .ci/setup "
        "(.ci/setup.d/26-esxcli-judge.sh)"
    )
    return exe


def esxcli_batch(lab: Any, vihost: str, commands: list[str], workdir: Path) -> list[Answer]:
    """Run the commands against one host through the lab's vCenter; one Answer per command."""
    workdir.mkdir(parents=True, exist_ok=True)
    batch = workdir / "esxcli-batch.txt"
    batch.write_text("\n".join(commands) + "\n")
    vc = lab.spec.vcenter
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "VI_PASSWORD": Path(lab.twin.files.password_file).read_text().strip(),
    }
    proc = subprocess.run(
        [
            str(esxcli_path()),
            "--debug",
            "--formatter=json",
            "--batch",
            str(batch),
            "--batch-param",
            "continueOnError=1",
            "--batch-param",
            f"resultPrefixLine={SEPARATOR}",
            "-r",
            f"https://127.0.0.1:{lab.twin.port}/sdk",
            "-t",
            str(lab.twin.files.cert_file),
            "-u",
            vc.user,
            "-h",
            vihost,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    chunks = proc.stdout.split(SEPARATOR + "\n")
    if len(chunks) != len(commands) + 1:
        raise AssertionError(
            f"esxcli -h {vihost} answered {len(chunks) - 1} of {len(commands)} commands "
            f"(exit {proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}"
        )
    answers = []
    for command, text in zip(commands, chunks[1:], strict=True):
        text = text.strip()
        try:
            answers.append(Answer(command, value=json.loads(text)))
        except json.JSONDecodeError:
            answers.append(Answer(command, error=text))
    return answers


def esxcli_one(lab: Any, vihost: str, args: list[str], workdir: Path) -> tuple[int, str]:
    """One plain esxcli call (no batch, text formatter): (exit code, what it printed)."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "VI_PASSWORD": Path(lab.twin.files.password_file).read_text().strip(),
    }
    proc = subprocess.run(
        [
            str(esxcli_path()),
            "-r",
            f"https://127.0.0.1:{lab.twin.port}/sdk",
            "-t",
            str(lab.twin.files.cert_file),
            "-u",
            lab.spec.vcenter.user,
            "-h",
            vihost,
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return proc.returncode, (proc.stdout + proc.stderr).strip()
