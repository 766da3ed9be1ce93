"""GPU checks: what nvidia-smi and the kernel say, against the spec's GPUs and versions."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, Severity, check, failed, passed, skipped
from validation.checks.match import model_matches, version_at_least, version_matches
from validation.facts.gpu import (
    CudaToolkit,
    DcgmDiag,
    GpuQuery,
    GpuTopology,
    NvlinkStatus,
    SmiHeader,
)
from validation.facts.system import KernelLog, LoadedModules
from validation.parsers import ParseError

Gpu = dict[str, str | None]


def _gpus(view: NodeView) -> list[Gpu]:
    return view.fact(GpuQuery)


def _per_gpu(gpus: list[Gpu], key: str) -> str:
    return ", ".join(f"GPU{g.get('index')}={g.get(key)}" for g in gpus) or "no GPUs"


def _needs_gpus(view: NodeView) -> Outcome | None:
    if view.expect.gpus == 0:
        return skipped("the spec gives this VM no GPUs", "0 GPUs")
    return None


@check("gpu.count", facts=(GpuQuery,))
def count(view: NodeView) -> Outcome:
    """nvidia-smi lists exactly the number of GPUs the VM's template asks for.

    Fix: check the VM's passthrough devices (rackcert provision) and that the driver loaded (dmesg).
    """
    want = view.expect.gpus
    probe = view.output(GpuQuery)
    if want == 0 and probe is not None and probe.missing:
        return passed("no GPUs (nvidia-smi not installed)", "0 GPUs")
    gpus = _gpus(view)
    if len(gpus) != want:
        return failed(f"{len(gpus)} GPU(s)", f"{want} GPU(s)", "GPU count differs from the spec")
    return passed(f"{len(gpus)} GPU(s)", f"{want} GPU(s)")


@check("gpu.model", facts=(GpuQuery,))
def model(view: NodeView) -> Outcome:
    """Every GPU is the model the hardware profile names for the placed GPUs.

    Fix: place the VM on the GPUs the spec names, or correct the hardware profile's model.
    """
    if (skip := _needs_gpus(view)) is not None:
        return skip
    gpus = _gpus(view)
    wanted = sorted(set(view.expect.gpu_models))
    names = [g.get("name") or "?" for g in gpus]
    bad = [n for n in names if not any(model_matches(n, w) for w in wanted)]
    if not gpus or bad:
        return failed(", ".join(names) or "no GPUs", " or ".join(wanted), "unexpected GPU model")
    return passed(", ".join(names), " or ".join(wanted))


@check("gpu.driver", facts=(GpuQuery,))
def driver(view: NodeView) -> Outcome:
    """Every GPU runs the NVIDIA driver version (or branch) the spec pins (guest.nvidia_driver).

    Fix: install the pinned driver (rackcert configure, role nvidia_driver) and reboot the VM.
    """
    want = view.expect.driver
    if not want:
        return skipped("guest.nvidia_driver is not set in the spec")
    gpus = _gpus(view)
    seen = sorted({g.get("driver_version") or "?" for g in gpus})
    if not gpus:
        return failed("no GPUs", want, "no GPU reports a driver version")
    if not all(version_matches(v, want) for v in seen):
        return failed(", ".join(seen), want, "driver version differs from the spec")
    return passed(", ".join(seen), want)


@check("gpu.cuda.driver", facts=(SmiHeader,))
def cuda_driver(view: NodeView) -> Outcome:
    """The driver supports at least the CUDA version the spec asks for (guest.cuda).

    Fix: install a driver branch whose CUDA version is at least the spec's guest.cuda.
    """
    want = view.expect.cuda
    if not want:
        return skipped("guest.cuda is not set in the spec")
    seen = view.fact(SmiHeader).cuda_driver or ""
    if not seen or not version_at_least(seen, want):
        return failed(seen or "no CUDA Version line", f">= {want}", "driver's CUDA is older")
    return passed(seen, f">= {want}")


@check("gpu.cuda.toolkit", facts=(CudaToolkit,))
def cuda_toolkit(view: NodeView) -> Outcome:
    """The CUDA toolkit installed in the guest has the spec's version (guest.cuda).

    Fix: install the CUDA toolkit of guest.cuda (rackcert configure, role nvidia_driver).
    """
    want = view.expect.cuda
    if not want:
        return skipped("guest.cuda is not set in the spec")
    seen = view.fact(CudaToolkit)
    if not seen:
        return failed("none", want, "no CUDA toolkit found (/usr/local/cuda/version.json, nvcc)")
    if not version_matches(seen, want):
        return failed(seen, want, "CUDA toolkit version differs from the spec")
    return passed(seen, want)


@check("gpu.persistence", facts=(GpuQuery,))
def persistence(view: NodeView) -> Outcome:
    """Persistence mode is Enabled on every GPU (no driver re-init between jobs).

    Fix: enable nvidia-persistenced (systemctl enable --now nvidia-persistenced).
    """
    if (skip := _needs_gpus(view)) is not None:
        return skip
    gpus = _gpus(view)
    off = [g for g in gpus if (g.get("persistence_mode") or "") != "Enabled"]
    if not gpus or off:
        return failed(_per_gpu(gpus, "persistence_mode"), "Enabled", "persistence mode is off")
    return passed(_per_gpu(gpus, "persistence_mode"), "Enabled")


@check("gpu.ecc.mode", facts=(GpuQuery,))
def ecc_mode(view: NodeView) -> Outcome:
    """ECC is Enabled on every GPU.

    Fix: nvidia-smi -e 1 on the GPU, then reboot the VM.
    """
    if (skip := _needs_gpus(view)) is not None:
        return skip
    gpus = _gpus(view)
    off = [g for g in gpus if (g.get("ecc.mode.current") or "") != "Enabled"]
    if not gpus or off:
        return failed(_per_gpu(gpus, "ecc.mode.current"), "Enabled", "ECC is not enabled")
    return passed(_per_gpu(gpus, "ecc.mode.current"), "Enabled")


def _count(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


@check("gpu.ecc.errors", facts=(GpuQuery,))
def ecc_errors(view: NodeView) -> Outcome:
    """No uncorrectable ECC errors since boot, no pending page retirement or row remap.

    Fix: drain the node, reset the GPU (nvidia-smi -r) or reboot; replace it if errors return.
    """
    if (skip := _needs_gpus(view)) is not None:
        return skip
    gpus = _gpus(view)
    problems = []
    for g in gpus:
        idx = g.get("index")
        volatile = _count(g.get("ecc.errors.uncorrected.volatile.total"))
        if volatile:
            problems.append(f"GPU{idx}: {volatile} uncorrectable since boot")
        for key in ("retired_pages.pending", "remapped_rows.pending", "remapped_rows.failure"):
            if (g.get(key) or "").lower() == "yes":
                problems.append(f"GPU{idx}: {key}=Yes")
    aggregate = sum(_count(g.get("ecc.errors.uncorrected.aggregate.total")) for g in gpus)
    seen = "; ".join(problems) or f"0 uncorrectable since boot ({aggregate} lifetime)"
    if problems:
        return failed(seen, "0 uncorrectable, nothing pending", "GPU memory errors")
    return passed(seen, "0 uncorrectable, nothing pending")


@check("gpu.pcie.link", facts=(GpuQuery,))
def pcie_link(view: NodeView) -> Outcome:
    """Each GPU's PCIe link runs at its full width and the slot allows the GPU's top generation.

    Fix: reseat the GPU or riser, check the slot's BIOS PCIe setting; width must equal width.max.
    """
    if (skip := _needs_gpus(view)) is not None:
        return skip
    gpus = _gpus(view)
    seen, bad = [], []
    for g in gpus:
        idx = g.get("index")
        width, wmax = g.get("pcie.link.width.current"), g.get("pcie.link.width.max")
        gen, gmax, gpumax = (
            g.get("pcie.link.gen.current"),
            g.get("pcie.link.gen.max"),
            g.get("pcie.link.gen.gpumax"),
        )
        seen.append(f"GPU{idx} gen{gen}/max{gmax} x{width}/x{wmax}")
        if width and wmax and width != wmax:
            bad.append(f"GPU{idx} at x{width} of x{wmax}")
        if gmax and gpumax and gmax.isdigit() and gpumax.isdigit() and int(gmax) < int(gpumax):
            bad.append(f"GPU{idx} slot allows gen{gmax}, GPU can do gen{gpumax}")
    expected = "width = width.max; slot gen max = GPU gen max (idle GPUs may train lower)"
    if not gpus or bad:
        return failed("; ".join(seen) or "no GPUs", expected, "; ".join(bad) or "no GPUs")
    return passed("; ".join(seen), expected)


@check("gpu.nvlink.active", facts=(NvlinkStatus, GpuTopology))
def nvlink_active(view: NodeView) -> Outcome:
    """The VM's two GPUs of a bridged pair have active NVLinks and topo -m shows NV# between them.

    Fix: seat the NVLink bridge on the pair, and give the VM both GPUs of the pair (placement).
    """
    if not view.expect.nvlink_pair:
        return skipped("placement gives this VM no NVLink-bridged pair", "no NVLink pair")
    links = view.fact(NvlinkStatus)
    topo = view.fact(GpuTopology)
    expected = "GPU0-GPU1 NV#, active links on both"
    seen_links = ", ".join(f"GPU{g.index}: {len(g.active)} active" for g in links) or "no GPUs"
    between = topo.link("GPU0", "GPU1") or "?"
    observed = f"{seen_links}; topo GPU0-GPU1 {between}"
    if len(links) < 2 or any(not g.active for g in links[:2]):
        return failed(observed, expected, "NVLink inactive on a GPU of the pair")
    if not between.startswith("NV"):
        return failed(observed, expected, f"topo -m shows {between} between the pair, not NV#")
    return passed(observed, expected)


# `nvidia-smi topo -m` links through which GPUDirect RDMA stays under one PCIe host bridge:
# PIX, PXB (PCIe bridges only) and PHB (through the CPU's host bridge). NODE crosses host
# bridges within a NUMA node and SYS the socket interconnect (QPI/UPI): NCCL's default
# NCCL_NET_GDR_LEVEL (PHB) does not use GPUDirect RDMA across them, and NVIDIA's GPUDirect
# RDMA guidance wants GPU and NIC under one PCIe root complex.
GDR_NEAR = ("PIX", "PXB", "PHB")


@check("gpu.nic_path", facts=(GpuTopology,), severity=Severity.warning)
def gpu_nic_path(view: NodeView) -> Outcome:
    """Each GPU reaches the VM's RDMA NIC through PIX, PXB or PHB in `nvidia-smi topo -m`.

    Fix: give the VM GPUs on the NUMA node of its NIC port (placement; gpu_nic_numa: required).
    """
    if not view.expect.rdma or not view.expect.gpus:
        return skipped("no GPU and RDMA NIC in this VM", "PIX, PXB or PHB")
    topo = view.fact(GpuTopology)
    nics = [d for d in topo.devices if d.startswith(("NIC", "mlx"))]
    expected = "GPU to NIC: " + ", ".join(GDR_NEAR)
    if not nics:
        return failed("no NIC in topo -m", expected, "the driver sees no NIC next to the GPUs")
    seen, far = [], []
    for gpu in topo.gpus():
        links = {nic: topo.link(gpu, nic) or "?" for nic in nics}
        best = min(links.items(), key=lambda kv: (kv[1] not in GDR_NEAR, kv[0]))
        seen.append(f"{gpu}-{best[0]} {best[1]}")
        if best[1] not in GDR_NEAR:
            far.append(f"{gpu}-{best[0]} {best[1]}")
    if far:
        why = (
            "GPUDirect RDMA would cross "
            + (
                "the socket interconnect (SYS)"
                if any(f.endswith("SYS") for f in far)
                else "PCIe host bridges (NODE)"
            )
            + f": {', '.join(far)}; NCCL's defaults (NCCL_NET_GDR_LEVEL=PHB) do not use it"
        )
        return failed("; ".join(seen), expected, why)
    return passed("; ".join(seen), expected)


# Fatal XIDs per public GPU health-check practice (Azure's published list for H100 nodes).
FATAL_XIDS = {48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120}


@check("gpu.xid", facts=(KernelLog,))
def xid(view: NodeView) -> Outcome:
    """The kernel log since boot holds no NVIDIA XID error.

    Fix: look the XID up in NVIDIA's XID catalogue; drain, reset the GPU, replace it if fatal.
    """
    out = view.output(KernelLog)
    if out is not None and out.rc != 0:
        first = out.text.strip().splitlines()[:1]
        reason = f"kernel log unreadable: {first[0][:160] if first else f'exit {out.rc}'}"
        return failed("kernel log unreadable", "no Xid lines", reason)
    events = view.fact(KernelLog)
    if not events:
        return passed("no Xid lines since boot", "no Xid lines")
    fatal = sorted({x for _, x, _ in events if x in FATAL_XIDS})
    seen = ", ".join(f"Xid {x} on {pci}" for pci, x, _ in events[-5:])
    note = f" (fatal: {fatal})" if fatal else ""
    return failed(f"{len(events)} XID event(s): {seen}", "no Xid lines", f"XID errors{note}")


@check("gpu.peermem", facts=(LoadedModules,))
def peermem(view: NodeView) -> Outcome:
    """nvidia_peermem is loaded when the VM has an RDMA NIC (GPUDirect RDMA).

    Fix: modprobe nvidia_peermem and add it to /etc/modules-load.d (role nvidia_peermem).
    """
    if not view.expect.rdma or view.expect.gpus == 0:
        return skipped("no RDMA NIC with GPUs in this VM (template nic mode)", "not needed")
    mods = view.fact(LoadedModules)
    if "nvidia_peermem" not in mods:
        have = ", ".join(sorted(m for m in mods if m.startswith("nvidia"))) or "no nvidia modules"
        return failed(have, "nvidia_peermem", "nvidia_peermem is not loaded")
    return passed("nvidia_peermem loaded", "nvidia_peermem")


@check("gpu.dcgm.diag", facts=(DcgmDiag,))
def dcgm_diag(view: NodeView) -> Outcome:
    """`dcgmi diag -r LEVEL -j` (certification.dcgm_diag_level) reports no failed test.

    Skipped, with its reason, where the VM has no GPUs, the level is 0 or DCGM is not
    installed. Warnings do not fail the check; they are listed.
    Fix: read the failed test's message in DCGM's diagnostics guide; start nv-hostengine.
    """
    if (skip := _needs_gpus(view)) is not None:
        return skip
    level = view.expect.dcgm_diag_level
    if level == 0:
        return skipped("certification.dcgm_diag_level is 0", "not run")
    want = f"no failed test at level {level}"
    out = view.output(DcgmDiag)
    if out is not None and out.missing:
        return skipped("DCGM is not installed (dcgmi not found)", want)
    if out is None:
        return failed("not asked", want, "fact dcgm_diag was not gathered")
    if out.rc == 124:
        return failed("timed out", want, out.why())
    try:
        # dcgmi exits non-zero when a test fails; its JSON report is still the answer.
        report = view.fact(DcgmDiag, any_status=True)
    except ParseError as exc:
        first = out.why() if out.rc else str(exc)
        return failed("no report", want, f"dcgmi diag gave no JSON report: {first}")
    bad = [r for r in report["results"] if r["status"] in ("fail", "failed", "error")]
    warned = [r for r in report["results"] if r["status"] in ("warn", "warning")]
    ran = len({r["test"] for r in report["results"]})
    if bad:
        seen = "; ".join(
            f"{r['test']} on {r['entity'] or 'all GPUs'}: {'; '.join(r['warnings'])[:160]}"
            for r in bad[:3]
        )
        return failed(f"{len(bad)} failed: {seen}", want, "DCGM diagnostic failed")
    note = f", {len(warned)} warning(s): {warned[0]['test']}" if warned else ""
    return passed(f"{ran} test(s) passed at level {level}{note}", want)


__all__ = ["FATAL_XIDS", "ParseError"]
