"""The FAKE GPU tools on a test host and their knobs, shared by the driver journeys:
tests/integration/test_configure_versions.py (Debian) and
tests/integration/test_families_driver.py (Ubuntu, RHEL).
"""

from __future__ import annotations

import shutil

from rackcert.core.paths import REPO_ROOT
from rackcert.lab.sshhosts.host import TestHost

FAKES = REPO_ROOT / "tests" / "support" / "fakes"
STATE = "/var/lib/rackcert-fake"
LAB_VARS = {
    "rackcert_facts_pci_devices": f"{STATE}/pci",
    "rackcert_facts_nvidia_version_file": f"{STATE}/proc-driver-nvidia-version",
    "nvidia_driver_reboot_command": "/usr/local/sbin/rackcert-fake-reboot",
    "nvidia_driver_boot_time_command": f"cat {STATE}/boot_id",
    "nvidia_driver_branch_packages": "^rackcert-fake-(cuda-drivers|nvidia-kernel)-[0-9]+$",
    "nvidia_driver_dkms": False,  # the air-gapped host has no kernel headers to install
}


def fake_gpu_node(host: TestHost) -> None:
    """A GPU on the host's PCI stand-in, nvidia-smi reading the loaded module, a fake reboot."""
    dev = host.path(f"{STATE}/pci/0000:13:00.0")
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x10de\n")
    local = host.path("/usr/local")
    shutil.copy(FAKES / "fake-nvidia-smi", local / "bin/nvidia-smi")
    (local / "bin/fake-nvidia-smi.json").write_text(
        f'{{"gpus": 1, "driver_file": "{STATE}/proc-driver-nvidia-version"}}\n'
    )
    shutil.copytree(REPO_ROOT / "tests/support/fixtures/h200", local / "fixtures/h200")
    (local / "sbin").mkdir(exist_ok=True)
    shutil.copy(FAKES / "fake-reboot", local / "sbin/rackcert-fake-reboot")
    out = host.exec(["/usr/local/sbin/rackcert-fake-reboot"])  # the first boot: no driver
    assert out.returncode == 0, out.stderr


def smi_driver(host: TestHost) -> str:
    out = host.exec(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.stdout.strip() if out.returncode == 0 else f"rc={out.returncode}"
