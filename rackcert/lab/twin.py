"""The vcsim rack twin: build it, describe a rack to it, start and stop it.

The twin is a small Go program in `twin/` on top of govmomi's vCenter
simulator. This module turns a rack spec (or a host count, for the discovery
benchmark) into the JSON description the Go side reads: hosts with the PCI
devices of their hardware profile (GPUs, NIC ports, the bridges they hang off),
NUMA nodes, passthrough state and ATS setting, plus optional pre-existing VMs
and injected faults. The twin listens on loopback only, over TLS with a
self-signed certificate written to a file, and checks the password from a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackcert.core.device_groups import pair_group_name, partition_group_name
from rackcert.core.errors import InputError, RackcertError
from rackcert.core.paths import REPO_ROOT
from rackcert.core.pci import DELL, INTEL
from rackcert.core.spec import Gpu, HardwareProfile, Nic, Spec
from rackcert.discover.catalog import shipped_catalog

SOURCE_DIR = REPO_ROOT / "twin"
GOPATH = "/usr/share/gocode"


# Short enough for tests; a real R750xa takes minutes, which the code's bounded wait allows.
REBOOT_TIMING = {"connected_ms": 150, "down_ms": 600}
# The twin's clock runs 800 times faster than a real rack's (twin/clock.go): a 9-minute
# host reboot takes 0.68 s, a 16 GB template's clone 0.07 s. The suite's timing stays what it was
# with the fixed reboot above; RACKCERT_TWIN_TIME_SCALE overrides it for one twin process.
TIME_SCALE = 1 / 800
PAGE_SIZE = 100
_VGPU_SIZES = {80: (4, 8, 10, 16, 20, 40, 80), 40: (4, 5, 8, 10, 20, 40)}


def gpu_ids(gpu: Gpu) -> tuple[int, int, int]:
    """(vendor, device, subsystem device) a real host reports for the spec's GPU model.

    The ids come from the discover catalog (rackcert/discover/catalog/devices.yaml, from
    pci.ids), the same table `spec discover` reads them back with: a part the catalog does
    not know cannot be put in a twin (add its row there).
    """
    part = shipped_catalog().gpu_named(gpu.model, gpu.memory_gb)
    if part is None:
        raise InputError(_unknown("GPU", gpu.model))
    return part.ids()


def nic_ids(nic: Nic) -> tuple[int, int, int]:
    """(vendor, device, subsystem device) for the spec's NIC model, from the catalog."""
    part = shipped_catalog().nic_named(nic.model)
    if part is None:
        raise InputError(_unknown("NIC", nic.model))
    return part.ids()


def _unknown(kind: str, model: str) -> str:
    return (
        f"twin: {kind} model {model!r} is not in the discover catalog"
        " (rackcert/discover/catalog/devices.yaml): add a row with its PCI ids"
    )


def port_pci(nic_pci: str, port: int) -> str:
    """PCI address of a NIC port: ports are functions of the same device (4b:00.0, 4b:00.1)."""
    return nic_pci[:-1] + str(port)


def _bridge_of(pci: str) -> str:
    """The root port a device hangs off: bus-1, device 02 (how the R750xa's slots look)."""
    bus = int(pci[5:7], 16)
    return f"{pci[:5]}{max(bus - 1, 0):02x}:02.0"


def _vgpu_types(gpus: list[Gpu]) -> list[str]:
    out: list[str] = []
    for gpu in gpus:
        if "h200" in gpu.model.lower() and "sxm" in gpu.model.lower():
            # The full-GPU C-series profile of the H200 SXM (NVIDIA vGPU for Compute); the
            # fractional ones are not modelled.
            if "grid_h200x-141c" not in out:
                out.append("grid_h200x-141c")
            continue
        if "a100" not in gpu.model.lower():
            continue
        prefix = "grid_a100d" if gpu.memory_gb >= 80 else "grid_a100"
        for size in _VGPU_SIZES[80 if gpu.memory_gb >= 80 else 40]:
            name = f"{prefix}-{size}c"
            if name not in out:
                out.append(name)
    return out


def pci_devices(profile: HardwareProfile) -> list[dict[str, Any]]:
    """Every PCI function a host of this profile reports: chipset, bridges, GPUs, NIC ports."""
    devices: list[dict[str, Any]] = [
        _dev("0000:00:00.0", INTEL, 0x09A2, 0x0600, "Intel Corporation", "Ice Lake Memory Map", 0),
        _dev("0000:00:17.0", INTEL, 0xA182, 0x0106, "Intel Corporation", "SATA Controller", 0),
    ]
    bridges: dict[str, int] = {}
    for gpu in profile.gpus:
        bridges.setdefault(_bridge_of(gpu.pci), gpu.numa)
    for nic in profile.nics:
        bridges.setdefault(_bridge_of(nic.pci), nic.numa)
    for pci, numa in sorted(bridges.items()):
        devices.append(
            _dev(pci, INTEL, 0x347A, 0x0604, "Intel Corporation", "Ice Lake PCIe Root Port", numa)
        )
    for gpu in profile.gpus:
        vendor, device, sub = gpu_ids(gpu)
        devices.append(
            _dev(gpu.pci, vendor, device, 0x0302, "NVIDIA Corporation", gpu.model, gpu.numa)
            | {"sub_vendor_id": vendor, "sub_device_id": sub, "parent_bridge": _bridge_of(gpu.pci)}
            | {"passthru_capable": True}
        )
    for nic in profile.nics:
        vendor, device, sub = nic_ids(nic)
        for port in range(nic.ports):
            devices.append(
                _dev(
                    port_pci(nic.pci, port),
                    vendor,
                    device,
                    0x0200,
                    "Mellanox Technologies",
                    nic.model,
                    nic.numa,
                )
                | {"sub_vendor_id": vendor, "sub_device_id": sub}
                | {"parent_bridge": _bridge_of(nic.pci), "passthru_capable": True}
            )
    return devices


def _dev(pci: str, vendor: int, device: int, cls: int, vname: str, dname: str, numa: int) -> dict:
    return {
        "id": pci,
        "vendor_id": vendor,
        "device_id": device,
        "sub_vendor_id": DELL if vendor == INTEL else 0,
        "sub_device_id": 0,
        "class_id": cls,
        "vendor_name": vname,
        "device_name": dname,
        "parent_bridge": "",
        "numa": numa,
        "passthru_capable": False,
        "passthru_enabled": False,
        "passthru_active": False,
    }


# Processors per server model, as ESXi reports them (HostCpuInfo, HostCpuPackage): the seed's
# Table 1 gives the R750xa 2 x Intel Xeon Gold 6338 @ 2.00 GHz, which Intel's ARK lists with
# 32 cores and 64 threads each. A model not listed gets the same, so a twin never reports the
# simulator's 2-thread laptop CPU.
SERVER_CPUS: dict[str, dict[str, Any]] = {
    "PowerEdge R750xa": {
        "model": "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
        "packages": 2,
        "cores_per_package": 32,
        "threads_per_core": 2,
        "mhz": 2000,
    },
}


def server_cpu(server_model: str) -> dict[str, Any]:
    """The processors a host of this server model reports (SERVER_CPUS)."""
    return dict(SERVER_CPUS.get(server_model, SERVER_CPUS["PowerEdge R750xa"]))


# ESXi builds of the releases the twin models (VMware release notes: ESXi 7.0 Update 3c,
# ESXi 8.0 Update 3); another version keeps the older placeholder build.
ESXI_BUILDS = {"7.0.3": "19193900", "8.0.3": "24022510"}
# The vCenter releases the twin stands for (twin/vsphere8.go).
TWIN_VCENTER_RELEASES = ("7.0.3", "8.0.3")


def device_groups(profile: HardwareProfile, esxi_version: str) -> list[dict[str, Any]]:
    """The vendor device groups a vSphere 8 host of this profile reports (none on 7.0.3).

    An HGX board: one group per Fabric Manager partition, its GPUs offering the board's
    vGPU profile (NVIDIA AI Enterprise: vGPU only on NVSwitch systems). PCIe GPUs joined by
    an NVLink bridge: one passthrough group per pair.
    """
    if not esxi_version.startswith("8."):
        return []
    if profile.board is not None:
        vgpu = next(iter(_vgpu_types(profile.gpus)), "")
        out = []
        for part in profile.board.partitions:
            gpus = [g.pci for m in sorted(part.modules) if (g := profile.module_gpu(m))]
            out.append(
                {
                    "name": partition_group_name(profile.board.name, part.id),
                    "description": f"{profile.board.name}: Fabric Manager partition {part.id},"
                    f" modules {', '.join(map(str, part.modules))}",
                    "gpus": gpus,
                    "vgpu": vgpu,
                }
            )
        return out
    pairs = sorted({tuple(sorted((g.pci, g.nvlink_peer))) for g in profile.gpus if g.nvlink_peer})
    return [
        {"name": pair_group_name(p), "description": "NVLink bridge", "gpus": list(p), "vgpu": ""}
        for p in pairs
    ]


def host_description(name: str, profile: HardwareProfile, esxi_version: str) -> dict[str, Any]:
    return {
        "cpu": server_cpu(profile.server_model),
        "name": name,
        "vendor": profile.vendor or "Dell Inc.",
        "model": profile.server_model,
        "esxi_version": esxi_version,
        "esxi_build": ESXI_BUILDS.get(
            esxi_version, "19193900" if esxi_version.startswith("7.0.3") else "20036589"
        ),
        "numa_nodes": profile.numa_nodes,
        "ats": False,
        "memory_gb": 512,
        "pci": pci_devices(profile),
        "vgpu_types": _vgpu_types(profile.gpus),
        "maintenance": False,
        "device_groups": device_groups(profile, esxi_version),
    }


@dataclass
class TwinFiles:
    """Where one twin keeps its password, certificate and state."""

    password_file: Path
    cert_file: Path
    key_file: Path
    workdir: Path

    @classmethod
    def in_dir(cls, workdir: Path) -> TwinFiles:
        return cls(
            workdir / "vcenter.password",
            workdir / "vcsim-cert.pem",
            workdir / "vcsim-key.pem",
            workdir,
        )

    @classmethod
    def for_spec(cls, spec: Spec, workdir: Path) -> TwinFiles:
        """The files where the spec's vcenter block says they are (lab.yaml's layout)."""
        vc = spec.vcenter
        password = Path(vc.password_file).expanduser() if vc.password_file else None
        cert = Path(vc.tls.ca_file).expanduser() if vc.tls.ca_file else None
        files = cls.in_dir(workdir)
        key = cert.with_name(cert.stem.replace("-cert", "") + "-key.pem") if cert else None
        return cls(
            password or files.password_file,
            cert or files.cert_file,
            key or files.key_file,
            workdir,
        )


def ensure_password(path: Path) -> None:
    """Create a random password file (0600) unless one exists."""
    if path.exists():
        return
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(18) + "\n")


# What a site's cloud-image template looks like before rackcert customizes a clone.
TEMPLATE_DISK_GB = 16
TEMPLATE_CPUS = 2
TEMPLATE_MEMORY_MB = 2048
DEFAULT_DATASTORE = "LocalDS_0"  # the twin's datastore on every host
DEFAULT_NETWORK = "VM Network"  # the port group every ESXi host starts with


def site_templates(spec: Spec, *, firmware: str = "efi") -> list[dict[str, Any]]:
    """The templates the spec's vm_templates[].source name, as the site prepared them.

    A cloud image with cloud-init, imported once and marked as template: EFI, a
    16 GB disk on the spec's datastore, a vmxnet3 NIC on the spec's port group, on
    the first host. `firmware` lets a test describe a BIOS template.
    """
    out: dict[str, dict[str, Any]] = {}
    for tmpl in spec.vm_templates:
        if not tmpl.source or tmpl.source in out:
            continue
        out[tmpl.source] = {
            "name": tmpl.source,
            "host": spec.hosts[0].address,
            "datastore": tmpl.datastore or DEFAULT_DATASTORE,
            "network": tmpl.network or DEFAULT_NETWORK,
            "guest_id": tmpl.guest_id,
            "firmware": firmware,
            "hardware_version": tmpl.hardware_version,
            "disk_gb": TEMPLATE_DISK_GB,
            "cpus": TEMPLATE_CPUS,
            "memory_mb": TEMPLATE_MEMORY_MB,
        }
    return list(out.values())


def site_objects(templates: list[dict[str, Any]], spec: Spec) -> dict[str, list[str]]:
    """Datastores and port groups the site has besides the twin's defaults."""
    datastores = {t["datastore"] for t in templates} | {
        t.datastore for t in spec.vm_templates if t.datastore
    }
    networks = {t["network"] for t in templates} | {
        t.network for t in spec.vm_templates if t.network
    }
    return {
        "datastores": sorted(datastores - {DEFAULT_DATASTORE}),
        "networks": sorted(networks - {DEFAULT_NETWORK}),
    }


def description_from_spec(
    spec: Spec,
    files: TwinFiles,
    *,
    port: int | None = None,
    vms: list[dict[str, Any]] | None = None,
    faults: dict[str, Any] | None = None,
    tls: bool | None = None,
    templates: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The twin of a spec's rack: its hosts under the names vCenter knows them by.

    `templates` (default: `site_templates(spec)`) are the site's VM templates; []
    describes a vCenter where the spec's template is missing.
    """
    vc = spec.vcenter
    if vc.version not in TWIN_VCENTER_RELEASES:
        raise InputError(
            f"vcenter.version {vc.version}: the twin stands for vCenter"
            f" {' or '.join(TWIN_VCENTER_RELEASES)}"
        )
    templates = site_templates(spec) if templates is None else templates
    hosts = [
        host_description(h.address, spec.profile(h.profile), h.esxi_version) for h in spec.hosts
    ]
    return {
        "listen": f"127.0.0.1:{vc.port if port is None else port}",
        "user": vc.user,
        "password_file": str(files.password_file),
        "tls": (vc.protocol == "https") if tls is None else tls,
        "cert_file": str(files.cert_file),
        "key_file": str(files.key_file),
        "datacenter": vc.datacenter or "DC0",
        "cluster": vc.cluster or "cluster0",
        "vcenter_version": vc.version,
        "hosts": hosts,
        "vms": vms or [],
        "faults": faults or {},
        # Every task takes a real rack's modelled time, times this scale (clock.go): a host
        # reboot as vCenter shows it, clones by disk size, guest boot until Tools run.
        "clock": {"scale": TIME_SCALE},
        "templates": templates,
        **site_objects(templates, spec),
        # The PropertyCollector's own page limit, as vCenter has one (collector.go).
        "page_size": PAGE_SIZE,
    }


def synthetic_description(
    count: int, spec: Spec, files: TwinFiles, *, vms_per_host: int = 1
) -> dict[str, Any]:
    """N hosts of the spec's first hardware profile, each with `vms_per_host` 1-GPU VMs
    (benchmarks)."""
    profile = spec.hardware_profiles[0]
    desc = description_from_spec(spec, files, port=0)
    desc["hosts"] = [
        host_description(f"esx{i:03d}.bench.internal", profile, "7.0.3") for i in range(count)
    ]
    for template in desc["templates"]:
        template["host"] = desc["hosts"][0]["name"]
    desc["vms"] = [
        {
            "name": f"vm{i:03d}" + (f"-{j}" if vms_per_host > 1 else ""),
            "host": f"esx{i:03d}.bench.internal",
            "cpus": 8,
            "memory_mb": 16384,
        }
        for i in range(count)
        for j in range(vms_per_host)
    ]
    return desc


def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCE_DIR.glob("*.go")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rackcert" / "vcsim"


def binary_path() -> Path:
    """The twin binary for the current Go sources (RACKCERT_VCSIM_BIN overrides)."""
    override = os.environ.get("RACKCERT_VCSIM_BIN")
    if override:
        return Path(override)
    return cache_dir() / _source_digest() / "rackcert-vcsim"


def build(*, quiet: bool = True) -> Path:
    """Build the twin once per source version; safe when several processes race to build it."""
    target = binary_path()
    if target.is_file():
        return target
    if not SOURCE_DIR.is_dir():
        raise InputError(f"the twin's Go sources are not here ({SOURCE_DIR}): run from a checkout")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        env = os.environ | {"GOPATH": GOPATH, "GO111MODULE": "off"}
        tmp = target.with_suffix(".tmp")
        try:
            proc = subprocess.run(
                ["go", "build", "-o", str(tmp), "."],
                cwd=SOURCE_DIR,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
        except FileNotFoundError:
            raise InputError(
                "go is not installed: apt-get install golang-go golang-github-vmware-govmomi-dev"
            ) from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise RackcertError(f"building the vcsim twin failed: {last}")
        os.replace(tmp, target)
    return target


@dataclass
class Twin:
    """A running twin process and where to reach it."""

    url: str
    port: int
    pid: int
    thumbprint: str
    files: TwinFiles
    process: subprocess.Popen | None = field(default=None, repr=False)

    def stop(self, timeout: float = 10) -> None:
        stop_pid(self.pid, timeout)
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.wait(timeout=timeout)


def stop_pid(pid: int, timeout: float = 10) -> bool:
    """Stop a twin by pid if it is still our twin binary; True if something was stopped."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if b"rackcert-vcsim" not in cmdline:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


PANIC_MARK = "rackcert-vcsim: handler panic"


def handler_panics(workdir: Path) -> list[str]:
    """The twin's handler-panic lines in its log (twin/intercept.go counts them).

    vCenter answers every call; a panic in the twin's handler is a twin bug that a client
    would otherwise see as a dropped connection and retry as a flaky network.
    """
    log = workdir / "twin.log"
    if not log.is_file():
        return []
    return [line for line in log.read_text(errors="replace").splitlines() if PANIC_MARK in line]


def start(desc: dict[str, Any], files: TwinFiles, *, detach: bool = False, timeout: float = 120):
    """Write the description, start the twin and wait until it listens."""
    binary = build()
    files.workdir.mkdir(parents=True, exist_ok=True)
    ensure_password(Path(desc["password_file"]))
    for key in ("cert_file", "key_file"):
        Path(desc[key]).parent.mkdir(parents=True, exist_ok=True)
    desc_path = files.workdir / "twin-description.json"
    state_path = files.workdir / "twin-state.json"
    desc_path.write_text(json.dumps(desc, indent=1))
    with contextlib.suppress(FileNotFoundError):
        state_path.unlink()
    log = open(files.workdir / "twin.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [str(binary), "-desc", str(desc_path), "-state", str(state_path)],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=detach,
    )
    log.close()
    deadline = time.monotonic() + timeout
    while not state_path.is_file():
        if proc.poll() is not None:
            tail = (files.workdir / "twin.log").read_text(errors="replace").strip().splitlines()
            raise RackcertError(f"the vcsim twin exited: {tail[-1] if tail else proc.returncode}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RackcertError(f"the vcsim twin did not start within {timeout:.0f} s")
        time.sleep(0.05)
    state = json.loads(state_path.read_text())
    return Twin(
        url=state["url"],
        port=int(state["port"]),
        pid=int(state["pid"]),
        thumbprint=state.get("thumbprint", ""),
        files=files,
        process=None if detach else proc,
    )
