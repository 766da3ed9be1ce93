"""Network checks: OFED, RDMA ports and speed, NIC ATS, and the data interface's MTU."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.checks.match import version_matches
from validation.facts.net import IbRates, MlxconfigAts, NetInterfaces, Ofed, RdmaPorts


def _needs_rdma(view: NodeView) -> Outcome | None:
    if not view.expect.rdma:
        return skipped("the VM's template gives it no passthrough/SR-IOV NIC (nic: vmxnet3)")
    return None


@check("ofed.version", facts=(Ofed,))
def ofed(view: NodeView) -> Outcome:
    """`ofed_info -s` reports the MLNX_OFED version the spec pins (guest.ofed).

    Fix: install the pinned MLNX_OFED (rackcert configure, role ofed) and reboot.
    """
    want = view.expect.ofed
    if not want:
        return skipped("guest.ofed is not set in the spec")
    seen = view.fact(Ofed)
    if not version_matches(seen, want):
        return failed(seen, want, "OFED version differs from the spec")
    return passed(seen, want)


@check("rdma.ports", facts=(RdmaPorts,))
def rdma_ports(view: NodeView) -> Outcome:
    """Every RDMA port is mapped to a net device and Up (`ibdev2netdev`).

    Fix: check the cable and switch port; `ip link set <netdev> up`; reload mlx5_core.
    """
    if (skip := _needs_rdma(view)) is not None:
        return skip
    ports = view.fact(RdmaPorts)
    seen = ", ".join(f"{p.device}/{p.port}=>{p.netdev} {'Up' if p.up else 'Down'}" for p in ports)
    if not ports:
        return failed("no RDMA ports", ">= 1 port Up", "no RDMA device is mapped to a netdev")
    down = [p for p in ports if not p.up]
    if down:
        return failed(seen, "all ports Up", f"{len(down)} RDMA port(s) down")
    return passed(seen, "all ports Up")


@check("rdma.speed", facts=(IbRates,))
def rdma_speed(view: NodeView) -> Outcome:
    """Every RDMA port runs at the NIC's line rate from the hardware profile (speed_gbps).

    Fix: check the cable/transceiver and the switch port speed; autonegotiation must reach it.
    """
    if (skip := _needs_rdma(view)) is not None:
        return skip
    rates = view.fact(IbRates)
    want = view.expect.nic_speed_gbps or 0
    seen = ", ".join(f"{k} {v:g} Gb/s" for k, v in sorted(rates.items())) or "no RDMA ports"
    slow = [k for k, v in rates.items() if v < want]
    if not rates or slow:
        return failed(seen, f"{want} Gb/s", "RDMA port below line rate" if rates else seen)
    return passed(seen, f"{want} Gb/s")


@check("nic.ats", facts=(MlxconfigAts,))
def nic_ats(view: NodeView) -> Outcome:
    """ATS_ENABLED is True on every Mellanox device (`mlxconfig q`), needed for P2P with GPUs.

    Fix: mlxconfig -d <pci> set ATS_ENABLED=true, then cold-reboot (role mlx_ats).
    """
    if (skip := _needs_rdma(view)) is not None:
        return skip
    ats = view.fact(MlxconfigAts)
    seen = ", ".join(f"{dev} {val}" for dev, val in sorted(ats.items())) or "no devices"
    off = [d for d, v in ats.items() if not v.startswith("True")]
    if not ats or off:
        return failed(seen, "True(1) on every device", "ATS is not enabled" if ats else seen)
    return passed(seen, "True(1) on every device")


@check("net.mtu", facts=(NetInterfaces,))
def mtu(view: NodeView) -> Outcome:
    """The data interface (network.interface, else the one with the VM's address) has network.mtu.

    Fix: set the MTU on the interface and switch ports (role network): ip link set X mtu 9000.
    """
    state = view.fact(NetInterfaces)
    want = view.expect.mtu
    iface = view.expect.interface
    if not iface:
        iface = next((i for i, a in state.addrs.items() if view.expect.address in a), None)
    if not iface or iface == "lo":  # --local on a spec that names 127.0.0.1
        iface = state.default_dev or iface
    if not iface or iface not in state.mtu:
        known = ", ".join(f"{k}={v}" for k, v in sorted(state.mtu.items()))
        return failed(f"no data interface found ({known})", want, "cannot tell the data interface")
    seen = state.mtu[iface]
    if seen != want:
        return failed(f"{iface} mtu {seen}", want, "MTU differs from the spec")
    return passed(f"{iface} mtu {seen}", want)
