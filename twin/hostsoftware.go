package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

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

// hasVGPUManager: the NVIDIA vGPU manager runs on the host: its VIB (of either release) was
// installed when the host last booted. NVIDIA's vGPU User Guide for vSphere reboots the host
// after `esxcli software vib install`; the manager's kernel module loads at that boot.
func hasVGPUManager(hs *simulator.HostSystem) bool {
	loaded, _ := managerLoaded.Load(hs.Self.Value)
	return loaded == true && vgpuManagerInstalled(hs)
}

// vgpuManagerInstalled: `software vib list` shows a vGPU manager VIB (perhaps not loaded yet).
func vgpuManagerInstalled(hs *simulator.HostSystem) bool {
	return hostHasVIB(hs, VGPUManagerVIB) || hostHasVIB(hs, VGPUManagerVIB80)
}

// managerLoaded: host moid -> whether the vGPU manager VIB was installed at the last boot.
var managerLoaded sync.Map

// hardwareVgpuTypes: host moid -> the vGPU profiles its GPUs support, which the host offers
// (config.sharedPassthruGpuTypes) only while the NVIDIA vGPU manager runs.
var hardwareVgpuTypes sync.Map

// bootSoftware is what a boot does to the host's software: an installed manager loads, and
// the host offers its GPUs' vGPU profiles from then on.
func bootSoftware(hs *simulator.HostSystem) {
	bootImage(hs)
	installed := vgpuManagerInstalled(hs)
	managerLoaded.Store(hs.Self.Value, installed)
	hw, _ := hardwareVgpuTypes.Load(hs.Self.Value)
	types, _ := hw.([]string)
	if !installed || len(types) == 0 || len(hs.Config.SharedPassthruGpuTypes) > 0 {
		return
	}
	hs.Config.SharedPassthruGpuTypes = append([]string(nil), types...)
	if ref := hs.ConfigManager.GraphicsManager; ref != nil {
		if gm, ok := simulator.Map.Get(*ref).(*GraphicsManager); ok {
			gm.SharedPassthruGpuTypes = hs.Config.SharedPassthruGpuTypes
		}
	}
}

// runningBase: host moid -> the esx-base version the host booted with.
var runningBase sync.Map

// bootImage: a host that boots with a new esx-base (a base image installed by vLCM, vlcm.go, or
// `esxcli software profile update`) runs that ESXi release from then on: config.product (and
// summary.config.product) name its version and build, which `esxcli system version get` reads.
// The esx-base VIB's version is <version>-<update>.<patch>.<build> (ESXi 7.0 U3c:
// 7.0.3-0.20.19193900). Called with the host locked (reboot).
func bootImage(hs *simulator.HostSystem) {
	base := ""
	for _, v := range softwareOf(hs) {
		if v.Name == "esx-base" {
			base = v.Version
		}
	}
	was, _ := runningBase.Load(hs.Self.Value)
	runningBase.Store(hs.Self.Value, base)
	dash := strings.Index(base, "-")
	if base == "" || was == base || dash < 0 || hs.Config == nil {
		return
	}
	product := hs.Config.Product
	product.Version = base[:dash]
	product.Build = base[strings.LastIndex(base, ".")+1:]
	product.FullName = fmt.Sprintf("VMware ESXi %s build-%s", product.Version, product.Build)
	product.ApiVersion = apiVersion(product.Version)
	hs.Config.Product = product
	hs.Summary.Config.Product = &product
}

// depots: offline bundle path -> the VIBs in it (Desc.Depots), set once at build; and the image
// profiles each holds (an ESXi offline bundle's image profiles, e.g. ESXi-7.0U3d-19482537-standard).
var (
	depots        = map[string][]VIB{}
	depotProfiles = map[string][]ProfileDesc{}
)

func setDepots(list []DepotDesc) {
	for _, d := range list {
		depots[d.Path] = d.VIBs
		depotProfiles[d.Path] = d.Profiles
	}
}

// vibID is how esxcli names a VIB in an installation result: <vendor>_bootbank_<name>_<version>.
func vibID(v VIB) string { return v.Vendor + "_bootbank_" + v.Name + "_" + v.Version }

// softwareVibInstall is `esxcli software vib install -d <bundle>` as ESXi answers it
// (ESXCLI command reference, software vib install; NVIDIA's vGPU User Guide for vSphere,
// "Installing the NVIDIA Virtual GPU Manager"): a bundle the host cannot read is refused
// with MetadataDownloadError; a VIB that cannot be installed live (a driver such as NVIDIA's
// manager) only in maintenance mode (MaintenanceModeError); an installed VIB of the same
// version is skipped; otherwise the VIB replaces any of its name ("VIBs may be installed,
// upgraded, or downgraded") and a reboot is required.
func softwareVibInstall(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	bundle, fault := readDepots(args["depot"])
	if fault != nil {
		return cliResult{}, fault
	}
	return installBundle(hs, bundle, installAny)
}

// softwareVibUpdate is `esxcli software vib update -d <bundle>` (ESXCLI command reference:
// "Update installed VIBs to newer VIB packages. No new VIBs will be installed, only
// updates."): a VIB of the bundle replaces an installed one of its name only where it is newer;
// the others are skipped.
func softwareVibUpdate(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	bundle, fault := readDepots(args["depot"])
	if fault != nil {
		return cliResult{}, fault
	}
	return installBundle(hs, bundle, updateOnly)
}

// softwareProfileUpdate is `esxcli software profile update -d <bundle> -p <profile>` (ESXCLI
// command reference: "Updates the host with VIBs from an image profile in a depot. Installed
// VIBs may be upgraded (or downgraded if --allow-downgrades is specified), but they will not
// be removed. Any VIBs in the image profile which are not related to any installed VIBs will
// be added to the host."), the way a cluster managed by baselines takes a new ESXi image or
// driver per host. A profile the bundle does not hold is a NoMatchError; without
// --allow-downgrades an older VIB than the installed one is skipped. A new esx-base runs after
// the reboot (bootImage).
func softwareProfileUpdate(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	bundle, fault := readDepots(args["depot"])
	if fault != nil {
		return cliResult{}, fault
	}
	name, _ := args.one("profile")
	var vibs []VIB
	found := false
	for _, path := range args["depot"] {
		for _, p := range depotProfiles[path] {
			if p.Name != name {
				continue
			}
			found = true
			for _, v := range bundle {
				for _, want := range p.VIBs {
					if v.Name == want {
						vibs = append(vibs, v)
					}
				}
			}
		}
	}
	if !found {
		return cliResult{}, &cliFault{Msg: []string{"[NoMatchError]",
			fmt.Sprintf("No image profile found with name '%s'", name), "id = " + name,
			"Please refer to the log file for more details."}}
	}
	policy := upgradeOnly
	if v, ok := args.one("allowdowngrades"); ok {
		if b, _ := parseBool(v); b {
			policy = installAny
		}
	}
	return installBundle(hs, vibs, policy)
}

// readDepots is the VIBs of the offline bundles named (MetadataDownloadError for one the host
// cannot read).
func readDepots(paths []string) ([]VIB, *cliFault) {
	var bundle []VIB
	for _, path := range paths {
		vibs, ok := depots[path]
		if !ok {
			url := "zip:" + path + "?index.xml"
			return nil, &cliFault{Msg: []string{"[MetadataDownloadError]",
				fmt.Sprintf("Could not download from depot at %s, skipping (('%s', '', \"Error extracting"+
					" index.xml from %s: [Errno 2] No such file or directory: '%s'\"))", url, url, path, path),
				"url = " + url, "Please refer to the log file for more details."}}
		}
		bundle = append(bundle, vibs...)
	}
	if len(bundle) == 0 {
		return nil, cliError("[InstallationError] At least one of --depot or --viburl must be given")
	}
	return bundle, nil
}

// What a command does with a bundle VIB whose name is installed at another version.
type installPolicy int

const (
	installAny  installPolicy = iota // vib install; profile update --allow-downgrades
	upgradeOnly                      // profile update: newer replaces, older is skipped, new names added
	updateOnly                       // vib update: newer replaces; nothing new is added
)

// installBundle installs what the policy takes from the bundle and answers esxcli's
// InstallationResult; a change outside maintenance mode is a MaintenanceModeError.
func installBundle(hs *simulator.HostSystem, bundle []VIB, policy installPolicy) (cliResult, *cliFault) {
	current := softwareOf(hs)
	var install, remove, skip []string
	var take []VIB
	for _, v := range bundle {
		var have *VIB
		for i := range current {
			if current[i].Name == v.Name {
				have = &current[i]
			}
		}
		switch {
		case have != nil && have.Version == v.Version,
			have == nil && policy == updateOnly,
			have != nil && policy != installAny && !vibVersionLess(have.Version, v.Version):
			skip = append(skip, vibID(v))
		default:
			if have != nil {
				remove = append(remove, vibID(*have))
			}
			install = append(install, vibID(v))
			take = append(take, v)
		}
	}
	if len(install) > 0 && !hs.Runtime.InMaintenanceMode {
		return cliResult{}, &cliFault{Msg: []string{"[MaintenanceModeError]",
			fmt.Sprintf("MaintenanceMode is required to remove: [%s]; install: [%s].",
				strings.Join(remove, ", "), strings.Join(install, ", ")),
			"Please refer to the log file for more details."}}
	}
	message := "Host is not changed."
	if len(install) > 0 {
		message = "The update completed successfully, but the system needs to be rebooted for the changes to be effective."
		installVIBs(hs, take)
	}
	r := row("Message", message, "Reboot Required", trueFalse(len(install) > 0))
	r.set("VIBs Installed", install...)
	r.set("VIBs Removed", remove...)
	r.set("VIBs Skipped", skip...)
	return cliResult{Rows: []cliRow{r}}, nil
}

// vibVersionLess compares VIB versions (535.154.02-1OEM.702.0.0.17630552) piece by piece,
// numbers as numbers, the way ESXi orders them for upgrades.
func vibVersionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// installVIBs puts the bundle's VIBs in the host's list (each replacing one of its name);
// they are in effect at the next boot (summary.rebootRequired).
func installVIBs(hs *simulator.HostSystem, bundle []VIB) {
	vibs := softwareOf(hs)
	for _, v := range bundle {
		v.InstallDate = time.Now().UTC().Format("2006-01-02")
		replaced := false
		for i := range vibs {
			if vibs[i].Name == v.Name {
				vibs[i], replaced = v, true
			}
		}
		if !replaced {
			vibs = append(vibs, v)
		}
	}
	hostVIBs.Store(hs.Self.Value, vibs)
	simulator.Map.WithLock(hs, func() { hs.Summary.RebootRequired = true })
}

// hostVIBs holds each host's VIB list (host moid -> []VIB), set once at build.
var hostVIBs sync.Map

// setHostSoftware gives the host its VIB list: the description's, else the one its hardware needs.
func setHostSoftware(hs *simulator.HostSystem, hd *HostDesc) {
	hardwareVgpuTypes.Store(hs.Self.Value, append([]string(nil), hd.VgpuTypes...))
	defer func() {
		managerLoaded.Store(hs.Self.Value, vgpuManagerInstalled(hs))
		for _, v := range softwareOf(hs) {
			if v.Name == "esx-base" {
				runningBase.Store(hs.Self.Value, v.Version)
			}
		}
	}()
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
	mellanox, vgpu := false, len(hd.VgpuTypes) > 0 && !hd.NoVGPUManager
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
