"""Item 3 of the twin's conformance: the shapes a real vCenter 7.0.3 returns.

Hosts report their server model's processors (the seed's Table 1: 2 x Intel Xeon Gold 6338,
32 cores and 64 threads each) and NUMA nodes with their CPUs and memory; the cluster sums its
hosts and has DRS and vSAN as the site has them (off: passthrough VMs do not move, storage is
NFS); VMs report what vCenter reports for them (resourceConfig, the locked reservation, device
keys and labels, no simulator key in extraConfig); AboutInfo says 7.0.
"""

from __future__ import annotations

from tests.support.twin_judges import find
from tests.support.vsphere_helpers import cli


def test_hosts_and_cluster_have_the_shapes_of_the_rack(rack_twin):
    from pyVmomi import vim

    lab = rack_twin()
    with lab.connect() as si:
        content = si.RetrieveContent()
        assert content.about.licenseProductVersion == "7.0"
        host = find(si, vim.HostSystem, "esx01.example.internal")
        cpu = host.hardware.cpuInfo
        assert (cpu.numCpuPackages, cpu.numCpuCores, cpu.numCpuThreads) == (2, 64, 128)
        assert cpu.hz == 2_000_000_000
        assert [p.description for p in host.hardware.cpuPkg] == [
            "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"
        ] * 2
        summary = host.summary.hardware
        assert (summary.numCpuPkgs, summary.numCpuCores, summary.numCpuThreads) == (2, 64, 128)
        assert summary.cpuModel.startswith("Intel(R) Xeon(R) Gold 6338")
        nodes = host.hardware.numaInfo.numaNode
        assert [list(n.cpuID) for n in nodes] == [list(range(64)), list(range(64, 128))]
        assert sum(n.memoryRangeLength for n in nodes) == host.hardware.memorySize
        # Each NUMA node owns the PCI functions of its socket: the ConnectX-6 on node 0.
        assert "0000:4b:00.0" in nodes[0].pciId and "0000:b1:00.0" in nodes[1].pciId

        cluster = find(si, vim.ClusterComputeResource, lab.spec.vcenter.cluster)
        total = cluster.summary
        hosts = cluster.host
        assert total.numHosts == len(hosts) == len(lab.spec.hosts)
        assert total.numCpuCores == 64 * len(hosts)
        assert total.numCpuThreads == 128 * len(hosts)
        assert total.totalCpu == 64 * 2000 * len(hosts)
        assert total.totalMemory == sum(h.hardware.memorySize for h in hosts)
        config = cluster.configurationEx
        assert config.drsConfig.enabled is False
        assert config.vsanConfigInfo.enabled is False
        pool = cluster.resourcePool
        assert pool.config.entity == pool


def test_vms_have_the_shapes_vcenter_reports(rack_twin, capsys):
    from pyVmomi import vim

    lab = rack_twin(guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    with lab.connect() as si:
        vm = find(si, vim.VirtualMachine, "s1-pair")
        config = vm.config
        assert config.memoryReservationLockedToMax is True
        assert config.memoryAllocation.reservation == config.hardware.memoryMB
        assert vm.resourceConfig.entity == vm
        assert vm.resourceConfig.memoryAllocation.reservation == config.hardware.memoryMB
        assert "govcsim" not in {o.key for o in config.extraConfig}
        labels = {
            d.key: d.deviceInfo.label
            for d in config.hardware.device
            if isinstance(
                d,
                vim.vm.device.VirtualPCIPassthrough
                | vim.vm.device.VirtualEthernetCard
                | vim.vm.device.VirtualDisk
                | vim.vm.device.VirtualSCSIController,
            )
        }
        assert labels == {
            1000: "SCSI controller 0",
            2000: "Hard disk 1",
            4000: "Network adapter 1",
            13000: "PCI device 0",
            13001: "PCI device 1",
            13002: "PCI device 2",
        }
        disk = next(d for d in config.hardware.device if d.key == 2000)
        assert disk.controllerKey == 1000
