"""What each node must be, derived from the spec alone (and `rackcert.core.placement`).

Checks never read the spec: they read a `NodeExpect`, so every expectation has
one place where it comes from, and the runner can hand it to the pytest process
as JSON. Nothing here is hard-coded per GPU model or site: versions, GPU count
and model, MTU, mount options and peers are all the spec's.

    >>> expect = expectations(spec)["mn-node1"]
    >>> expect.driver, expect.gpus, expect.mtu
    ('470.82.01', 1, 9000)
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from rackcert.core.placement import place
from rackcert.core.spec import GpuMode, NicMode, Spec


class Peer(BaseModel):
    name: str
    address: str
    port: int = 22


class PortUse(BaseModel):
    """A TCP port a peer must reach on this node, and what listens there."""

    port: int
    use: str


class MountExpect(BaseModel):
    mount_point: str
    source: str
    fstype: str
    options: list[str] = Field(default_factory=list)


class VgpuManager(BaseModel):
    """The NVIDIA vGPU manager on a VM's ESXi host, as the recorded discovery's esxcli saw it.

    Not from the spec: `validation.host_software` fills it in from provision's discovery
    (`software vib list`), so `gpu.vgpu.branch` can judge the guest against its host.
    """

    host: str
    answered: bool = Field(False, description="The host answered esxcli")
    version: str = Field(
        "", description="The manager VIB's version; empty when the host answered and lists none"
    )
    why: str = Field("", description="Why it is not known (answered False)")


class NodeExpect(BaseModel):
    """Everything the guest checks compare against, for one VM."""

    node: str
    address: str
    ssh_port: int = 22
    user: str = "root"
    host: str | None = Field(None, description="ESXi host the VM is placed on")
    gpus: int = 0
    gpu_models: list[str] = Field(default_factory=list)
    gpu_pcis: list[str] = Field(default_factory=list, description="Host PCI ids, from placement")
    nvlink_pair: bool = False
    driver: str | None = None
    cuda: str | None = None
    ofed: str | None = None
    container_toolkit: str | None = None
    container_runtime: str = "none"
    rdma: bool = Field(False, description="NIC given to the VM (passthrough/SR-IOV): RDMA expected")
    nic_model: str | None = None
    nic_speed_gbps: int | None = None
    mtu: int = 9000
    interface: str | None = None
    mount: MountExpect | None = None
    os: str = ""
    peers: list[Peer] = Field(default_factory=list)
    peer_known_hosts: list[str] | None = Field(
        None,
        description="known_hosts lines of the peers, as the controller enrolled or the spec"
        " pinned them (rackcert.core.known_hosts): the only keys ssh.peers trusts; none: the"
        " node's own known_hosts (what configure's ssh_trust role installed), strictly",
    )
    dcgm_diag_level: int = 1
    firewall_ports: list[PortUse] = Field(
        default_factory=list,
        description="Ports every peer must reach besides its SSH port (net.firewall): slurmd,"
        " the ends of srun's and the launchers' ranges",
    )
    vgpu: bool = Field(False, description="The VM's GPUs are NVIDIA vGPUs: a licence is expected")
    partition: int | None = Field(
        None, description="Fabric Manager partition of an HGX board the VM's GPUs form"
    )
    nvlink_links: int = Field(0, description="NVLinks every GPU must have up (HGX SXM: 18)")
    nvlink_gbps: float | None = Field(None, description="Speed of each link, GB/s, per nvidia-smi")
    vgpu_manager: VgpuManager | None = Field(
        None,
        description="The vGPU manager of the VM's host (validation.host_software, from the"
        " recorded discovery); none: no discovery on record asked the host",
    )


# NVLinks of an SXM module on an HGX board, as `nvidia-smi nvlink -s` reports them: H100 and
# H200 SXM have 18 fourth-generation NVLinks (NVIDIA H100/H200 datasheets: 900 GB/s), each
# shown at 26.562 GB/s. By model words; a board GPU not listed is not judged per link.
SXM_NVLINKS: tuple[tuple[str, int, float], ...] = (("H100", 18, 26.562), ("H200", 18, 26.562))


def sxm_nvlinks(model: str) -> tuple[int, float | None]:
    """(links, GB/s per link) an SXM module of this model shows; (0, None) when unknown."""
    words = model.upper().replace("-", " ").split()
    for name, links, gbps in SXM_NVLINKS:
        if name in words:
            return links, gbps
    return 0, None


def _range_ends(text: str, use: str) -> list[PortUse]:
    low, _, high = text.partition("-")
    ends = sorted({int(low), int(high or low)})
    return [PortUse(port=p, use=use) for p in ends]


def _firewall_ports(spec: Spec) -> list[PortUse]:
    """What net.firewall probes on each peer: slurmd's port where the rack joins Slurm, and
    the first and last port of srun's and the launchers' ranges (a zone opens a range whole
    or not at all, so its ends tell; probing 3000 ports would not)."""
    fw = spec.network.firewall
    out: list[PortUse] = []
    if spec.slurm is not None:
        out.append(PortUse(port=spec.slurm.slurmd_port, use="slurmd"))
        out += _range_ends(fw.srun_port_range, "srun SrunPortRange")
    out += _range_ends(fw.launcher_port_range, "launcher rendezvous/MPI")
    return out


def _mount(spec: Spec) -> MountExpect | None:
    nfs = spec.storage.nfs
    if nfs is None:
        return None
    if nfs.fstype == "none":
        return MountExpect(
            mount_point=nfs.mount_point, source=nfs.export, fstype="none", options=nfs.options
        )
    return MountExpect(
        mount_point=nfs.mount_point,
        source=f"{nfs.server}:{nfs.export}",
        fstype=nfs.fstype,
        options=nfs.options,
    )


def expectations(spec: Spec) -> dict[str, NodeExpect]:
    """One NodeExpect per VM of the spec, in spec order."""
    placements = {p.vm: p for p in place(spec)}
    guest = spec.guest
    out: dict[str, NodeExpect] = {}
    for vm in spec.vms:
        tmpl = spec.template(vm.template)
        placed = placements[vm.name]
        profile = spec.host_profile(placed.host)
        by_pci = {g.pci: g for g in profile.gpus}
        nic = next((n for n in profile.nics if n.pci == placed.nic), None)
        rdma = tmpl.nic in (NicMode.passthrough, NicMode.sriov) and nic is not None
        links, gbps = (0, None)
        if profile.board is not None and placed.gpus:
            links, gbps = sxm_nvlinks(by_pci[placed.gpus[0]].model)
        out[vm.name] = NodeExpect(
            node=vm.name,
            address=vm.address,
            ssh_port=vm.ssh_port,
            user=guest.ssh.user,
            host=placed.host,
            gpus=tmpl.gpus,
            gpu_models=[by_pci[p].model for p in placed.gpus],
            gpu_pcis=list(placed.gpus),
            nvlink_pair=placed.nvlink_pair,
            vgpu=tmpl.gpu_mode is GpuMode.vgpu and tmpl.gpus > 0,
            partition=placed.partition,
            nvlink_links=links,
            nvlink_gbps=gbps,
            driver=guest.nvidia_driver,
            cuda=guest.cuda,
            ofed=guest.ofed,
            container_toolkit=guest.container_toolkit,
            container_runtime=guest.container_runtime,
            rdma=rdma,
            dcgm_diag_level=spec.certification.dcgm_diag_level,
            nic_model=nic.model if rdma and nic else None,
            nic_speed_gbps=nic.speed_gbps if rdma and nic else None,
            mtu=spec.network.mtu,
            interface=spec.network.interface,
            mount=_mount(spec),
            os=guest.os,
            firewall_ports=_firewall_ports(spec),
            peers=[
                Peer(name=p.name, address=p.address, port=p.ssh_port)
                for p in spec.vms
                if p.name != vm.name
            ],
        )
    return out
