package main

import (
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
)

// The software a host runs, as data of the host model: its ESXi image's VIBs
// (vSphere Installation Bundles). esxcli `software vib list` shows them, and
// other parts of the twin ask the same list (hostHasVIB) whether, for example,
// the NVIDIA vGPU manager is installed. The list follows the host's hardware:
//
//   - every host: the base image (esx-base, esx-ui, vmw-ahci for the SATA/BOSS
//     controller), versioned with the host's ESXi build;
//   - a Mellanox ConnectX NIC: nmlx5-core and nmlx5-rdma, the inbox drivers
//     ESXi 7.0 ships for ConnectX-4/5/6 (VMware Compatibility Guide, I/O devices;
//     NVIDIA "Mellanox Native ESXi Driver for VMware vSphere 7.0");
//   - NVIDIA GPUs with vGPU profiles offered (config.sharedPassthruGpuTypes is
//     filled only where the NVIDIA vGPU Manager runs): the NVIDIA AI Enterprise
//     host driver VIB (NVIDIA Virtual GPU Software User Guide, "Installing and
//     Configuring the NVIDIA Virtual GPU Manager for VMware vSphere":
//     `esxcli software vib list | grep -i nvd`, vendor NVD). A GPU given whole
//     to VMs in passthrough needs no host driver.
// A description may list the VIBs itself (HostDesc.VIBs) to model a host that
// lacks one its hardware needs.

// VIB is one row of `esxcli software vib list` (ESXCLI command reference, 7.0:
// Name, Version, Vendor, Acceptance Level, Install Date).
type VIB struct {
	Name            string `json:"name"`
	Version         string `json:"version"`
	Vendor          string `json:"vendor"`
	AcceptanceLevel string `json:"acceptance_level"`
	InstallDate     string `json:"install_date"`
}

// The NVIDIA vGPU manager's VIB names: NVIDIA AI Enterprise's host driver for ESXi 7.0
// (2.x+) and for ESXi 8.0 (NVIDIA AI Enterprise release notes and the vGPU User Guide,
// "Installing the NVIDIA Virtual GPU Manager": NVD-AIE_ESXi_7.0.2_Driver,
// NVD-AIE-800_ESXi_8.0.0_Driver). A host runs the one built for its ESXi release.
const (
	VGPUManagerVIB   = "NVD-AIE_ESXi_7.0.2_Driver"
	VGPUManagerVIB80 = "NVD-AIE-800_ESXi_8.0.0_Driver"
)

// vgpuManagerVIB is the manager VIB an ESXi release takes.
func vgpuManagerVIB(version string) string {
	if strings.HasPrefix(version, "8.") {
		return VGPUManagerVIB80
	}
	return VGPUManagerVIB
}

// vgpuManagerVersion is the manager VIB's version on a host of that ESXi release: the
// NVIDIA Virtual GPU Manager version of one vGPU software release, then the VIB's build tag.
// NVIDIA's vGPU release notes for VMware vSphere, "NVIDIA vGPU Software Driver Versions":
//   - vGPU 16.3 (branch R535, long-term support; ESXi 7.0 and 8.0): Virtual GPU Manager
//     535.154.02, Linux guest driver 535.154.05;
//   - vGPU 17.4 (branch R550, production; ESXi 8.0): Virtual GPU Manager 550.127.06, Linux
//     guest driver 550.127.05.
//
// The guest's driver must come from the manager's release branch ("Compatibility Requirements
// for the NVIDIA vGPU Manager and Guest VM Driver"). An ESXi 7.0 host runs R535 here, an 8.0
// host R550 (the H100/H200 HGX racks of inventories/ run 8.0.3 with R550 guests). The build
// tags are those of the 7.0.2 and 8.0 driver VIBs (1OEM.702..., 1OEM.800...).
func vgpuManagerVersion(version string) string {
	if strings.HasPrefix(version, "8.") {
		return "550.127.06-1OEM.800.1.0.20613240"
	}
	return "535.154.02-1OEM.702.0.0.17630552"
}

// hasVGPUManager: the host has the NVIDIA vGPU manager VIB of either release installed.
func hasVGPUManager(hs *simulator.HostSystem) bool {
	return hostHasVIB(hs, VGPUManagerVIB) || hostHasVIB(hs, VGPUManagerVIB80)
}

// hostVIBs holds each host's VIB list (host moid -> []VIB), set once at build.
var hostVIBs sync.Map

// setHostSoftware gives the host its VIB list: the description's, else the one its hardware needs.
func setHostSoftware(hs *simulator.HostSystem, hd *HostDesc) {
	if hd.VIBs != nil {
		hostVIBs.Store(hs.Self.Value, append([]VIB(nil), hd.VIBs...))
		return
	}
	build := orDefault(hd.Build, "19193900")
	version := orDefault(hd.Version, "7.0.3")
	vmw := func(name, ver string) VIB {
		return VIB{Name: name, Version: ver, Vendor: "VMW", AcceptanceLevel: "VMwareCertified", InstallDate: "2022-02-01"}
	}
	tag := "1vmw." + strings.ReplaceAll(version, ".", "") + ".0.20." + build
	vibs := []VIB{
		{Name: "esx-base", Version: version + "-0.20." + build, Vendor: "VMware",
			AcceptanceLevel: "VMwareCertified", InstallDate: "2022-02-01"},
		{Name: "esx-ui", Version: "1.36.0-18403931", Vendor: "VMware",
			AcceptanceLevel: "VMwareCertified", InstallDate: "2022-02-01"},
		vmw("vmw-ahci", "2.0.9-"+tag),
	}
	mellanox, vgpu := false, len(hd.VgpuTypes) > 0
	for _, p := range hd.PCI {
		mellanox = mellanox || (p.VendorID == mellanoxVendor && p.ClassID>>8 == 0x02)
	}
	if mellanox {
		vibs = append(vibs, vmw("nmlx5-core", "4.19.16.11-"+tag), vmw("nmlx5-rdma", "4.19.16.11-"+tag))
	}
	if vgpu {
		vibs = append(vibs, VIB{Name: vgpuManagerVIB(version), Version: vgpuManagerVersion(version),
			Vendor: "NVD", AcceptanceLevel: "VMwareAccepted", InstallDate: "2022-02-01"})
	}
	hostVIBs.Store(hs.Self.Value, vibs)
}

// softwareOf is the host's VIB list.
func softwareOf(hs *simulator.HostSystem) []VIB {
	v, _ := hostVIBs.Load(hs.Self.Value)
	vibs, _ := v.([]VIB)
	return vibs
}

// hostHasVIB: whether the host has the VIB of that name installed.
func hostHasVIB(hs *simulator.HostSystem, name string) bool {
	for _, v := range softwareOf(hs) {
		if v.Name == name {
			return true
		}
	}
	return false
}

const (
	mellanoxVendor = 0x15b3
	nvidiaVendor   = 0x10de
)
