"""vSphere rules in one home: what provision writes, validation expects and discover reads.

Provision plans a VM's extraConfig and the host's ATS option from these rules,
validation's hypervisor checks judge the recorded discovery by the same rules,
and both retry the same faults. Keeping one copy is the point: a rule written
twice drifts, and then a check fails on what provision correctly did (or passes
on what it never does).

Sources:
- 64-bit MMIO for large-BAR passthrough GPUs: VMware's and NVIDIA's guidance for
  GPUs in DirectPath I/O: `pciPassthru.use64bitMMIO = TRUE` and
  `pciPassthru.64bitMMIOSizeGB` = the VM's GPU memory rounded up to a power of
  two, then doubled (1 x A100 80GB -> 256, 2 x 80GB -> 512, 2 x 40GB -> 256).
- P2P: NVIDIA's GPUDirect RDMA guidance for vSphere asks for
  `pciPassthru.allowP2P` and `pciPassthru.RelaxACSforP2P` on a VM whose
  passthrough devices talk peer to peer, GPU to NIC included.
- NVLink P2P between vGPUs on A100 needs `pciPassthru<n>.cfg.enable_uvm = 0`.
- ATS: the VMkernel boot option `atsSupport` (esxcli `system settings kernel`),
  reachable through the API as the advanced option `VMkernel.Boot.atsSupport`.

    >>> mmio_size_gb([80, 80])
    512
    >>> wanted_extra_config(template, placement, profile)[ALLOW_P2P]
    'true'
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable
from typing import TypeVar

from rackcert.core.placement import VmPlacement
from rackcert.core.spec import GpuMode, HardwareProfile, NicMode, VmTemplate

# -- extraConfig keys rackcert owns on a VM ----------------------------------------------------
MMIO_ENABLE = "pciPassthru.use64bitMMIO"
MMIO_SIZE = "pciPassthru.64bitMMIOSizeGB"
ALLOW_P2P = "pciPassthru.allowP2P"
RELAX_ACS = "pciPassthru.RelaxACSforP2P"
P2P_KEYS = (ALLOW_P2P, RELAX_ACS)
NUMA_AFFINITY = "numa.nodeAffinity"


def vgpu_uvm_key(slot: int) -> str:
    """`pciPassthru<slot>.cfg.enable_uvm`: the per-vGPU unified-memory switch."""
    return f"pciPassthru{slot}.cfg.enable_uvm"


# -- the ATS boot option on an ESXi host -------------------------------------------------------
ATS_OPTION = "VMkernel.Boot.atsSupport"
ESXCLI_ATS = "esxcli system settings kernel set -s atsSupport -v TRUE"


# -- MMIO sizing -------------------------------------------------------------------------------
def next_power_of_two(value: int) -> int:
    """The smallest power of two >= value (1 for 0 or less)."""
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def mmio_size_gb(gpu_memory_gb: list[int], override: int | None = None) -> int:
    """pciPassthru.64bitMMIOSizeGB: the VM's GPU memory rounded up to a power of two, doubled.

    0 for a VM without GPU memory; the template's `mmio_size_gb` overrides it.
    """
    if override:
        return override
    total = sum(gpu_memory_gb)
    return 2 * next_power_of_two(total) if total > 0 else 0


# -- the P2P rule ------------------------------------------------------------------------------
def p2p_devices(tmpl: VmTemplate, placement: VmPlacement) -> int:
    """Devices of the VM that talk peer to peer: its GPUs plus its passthrough NIC.

    1 GPU + a passthrough ConnectX needs the P2P keys as much as 2 GPUs do
    (GPUDirect RDMA). vGPUs count among themselves only: a NIC does no P2P
    with a vGPU.
    """
    gpus = len(placement.gpus)
    if tmpl.gpu_mode is GpuMode.vgpu:
        return gpus
    nic = 1 if placement.nic and tmpl.nic is NicMode.passthrough else 0
    return gpus + nic


def needs_p2p(tmpl: VmTemplate, placement: VmPlacement) -> bool:
    """Two or more P2P devices: the VM gets allowP2P and RelaxACSforP2P."""
    return p2p_devices(tmpl, placement) >= 2


# -- the whole extraConfig ---------------------------------------------------------------------
def wanted_extra_config(
    tmpl: VmTemplate, placement: VmPlacement, profile: HardwareProfile
) -> dict[str, str]:
    """extraConfig keys rackcert owns for this VM, with the strings vSphere stores.

    Provision writes exactly this; the hypervisor checks expect exactly this.
    """
    memory = {g.pci: g.memory_gb for g in profile.gpus}
    out: dict[str, str] = {}
    gpus = list(placement.gpus)
    if gpus and tmpl.gpu_mode is GpuMode.passthrough:
        out[MMIO_ENABLE] = "TRUE"
        out[MMIO_SIZE] = str(mmio_size_gb([memory[g] for g in gpus], tmpl.mmio_size_gb))
    if needs_p2p(tmpl, placement):
        out[ALLOW_P2P] = "true"
        out[RELAX_ACS] = "true"
    if len(gpus) >= 2 and tmpl.gpu_mode is GpuMode.vgpu:
        for slot in range(len(gpus)):
            out[vgpu_uvm_key(slot)] = "0"
    if tmpl.numa_affinity and placement.numa is not None and gpus:
        out[NUMA_AFFINITY] = str(placement.numa)
    return out


# -- transient faults --------------------------------------------------------------------------
# What a client sees when vCenter (or its reverse proxy) drops, resets or restarts the
# connection: a reset or refused socket (ConnectionError), a response cut short or never
# sent (http.client.RemoteDisconnected, IncompleteRead, BadStatusLine: HTTPException), no
# answer in time (TimeoutError), a TLS stream that ends mid-record (ssl.SSLEOFError, an
# ssl.SSLError). Discovery retries them, apply reports them as "the connection dropped",
# a host reboot tolerates them for a while.
TRANSIENT_FAULTS: tuple[type[BaseException], ...] = (
    ConnectionError,
    http.client.HTTPException,
    TimeoutError,
    ssl.SSLError,
)
# Never retried: a certificate that does not verify is a verdict on the peer, not a fault
# of the line (ssl.SSLCertVerificationError is an ssl.SSLError).
NOT_TRANSIENT: tuple[type[BaseException], ...] = (ssl.SSLCertVerificationError,)

T = TypeVar("T")


def is_transient(exc: BaseException, final: tuple[type[BaseException], ...] = ()) -> bool:
    """A fault worth another attempt: transient, not a verdict, not in `final`."""
    return isinstance(exc, TRANSIENT_FAULTS) and not isinstance(exc, NOT_TRANSIENT + final)


def with_retries(
    call: Callable[[], T],
    attempts: int = 3,
    *,
    final: tuple[type[BaseException], ...] = (),
    backoff_s: float = 0.2,
) -> T:
    """`call()`, again after a transient fault (backoff 0.2 s, 0.4 s, ...); the rest is final.

    `final` names transient faults that are a verdict for this call (a login refused
    because nobody listens is the address's fault, not the line's).
    """
    for attempt in range(attempts):
        try:
            return call()
        except TRANSIENT_FAULTS as exc:
            if attempt == attempts - 1 or not is_transient(exc, final):
                raise
            time.sleep(backoff_s * 2**attempt)
    raise AssertionError("unreachable")
