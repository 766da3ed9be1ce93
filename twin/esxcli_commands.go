package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// The esxcli commands the twin serves, each answered from the same host model
// as the API view (hardware.pciDevice, config.pciPassthruInfo, the host's
// OptionManager, config.product, config.storageDevice, the VIB list of
// hostsoftware.go). Options, columns and values follow VMware's ESXCLI command
// reference for ESXi 7.0.3.

// cliArgs are a command's arguments: parameter name -> values (arrays repeat).
type cliArgs map[string][]string

func (a cliArgs) one(name string) (string, bool) {
	v, ok := a[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// cliRow is one result structure: field display name -> values, in column order.
type cliRow struct {
	keys   []string
	values map[string][]string
}

func row(kv ...string) cliRow {
	r := cliRow{values: map[string][]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.set(kv[i], kv[i+1])
	}
	return r
}

func (r *cliRow) set(key string, values ...string) {
	if _, ok := r.values[key]; !ok {
		r.keys = append(r.keys, key)
	}
	r.values[key] = values
}

// cliResult is what a command answers: rows (a list or one structure) or a simple value.
type cliResult struct {
	Rows   []cliRow
	Simple string // boolean/string/long value when the result is simple
}

// cliFault is the fault a command ends in: vim.EsxCLI.CLIFault (Kind "") or a vmodl fault.
type cliFault struct {
	Kind string // "" (CLIFault), or a vmodl fault's WSDL name (InvalidRequest, ...)
	Msg  []string
}

func cliError(format string, a ...interface{}) *cliFault {
	return &cliFault{Msg: []string{fmt.Sprintf(format, a...)}}
}

type cliHandler func(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault)

func trueFalse(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true, true
	case "false", "0", "no", "off":
		return false, true
	}
	return false, false
}

var esxcliApps = []cliApp{
	{
		Path: "system.version", Help: "Commands to get version information.",
		Methods: []cliMethod{{Name: "get", Help: "Display the product name, version and build information.",
			Result: "VersionGet", Formatter: "simple", Fields: "Product,Version,Build,Update,Patch", Run: systemVersionGet}},
		Types: map[string][]cliField{"VersionGet": {{Display: "Build"}, {Display: "Patch"}, {Display: "Product"},
			{Display: "Update"}, {Display: "Version"}}},
	},
	{
		Path: "system.settings.kernel", Help: "VMkernel boot options.",
		Methods: []cliMethod{
			{Name: "list", Help: "List VMkernel kernel settings.",
				Params: []cliParam{{Name: "option", Display: "option", Aliases: []string{"-o", "--option"},
					Help: "The name of the VMkernel kernel setting to get."}},
				Result: "KernelSetting", List: true, Formatter: "table",
				Fields: "Name,Type,Configured,Runtime,Default,Description", Run: kernelList},
			{Name: "set", Help: "Set a VMkernel setting.",
				Params: []cliParam{
					{Name: "setting", Display: "setting", Aliases: []string{"-s", "--setting"}, Required: true,
						Help: "The name of the VMkernel setting to set."},
					{Name: "value", Display: "value", Aliases: []string{"-v", "--value"}, Required: true,
						Help: "The value to set the setting to."}},
				Result: "boolean", Run: kernelSet},
		},
		Types: map[string][]cliField{"KernelSetting": {{Display: "Configured"}, {Display: "Default"},
			{Display: "Description"}, {Display: "Name"}, {Display: "Runtime"}, {Display: "Type"}}},
	},
	{
		Path: "hardware.pci", Help: "PCI device information.",
		Methods: []cliMethod{{Name: "list", Help: "List all of the PCI devices on this host.",
			Params: []cliParam{{Name: "class", Display: "class", Aliases: []string{"-c", "--class"}, Type: "long",
				Help: "Filter the PCI devices based on their class code."}},
			Result: "PCIDevice", List: true, Formatter: "simple", Run: hardwarePciList,
			Fields: "Address,Segment,Bus,Slot,Function,VMkernel Name,Vendor Name,Device Name,Configured Owner," +
				"Current Owner,Vendor ID,Device ID,SubVendor ID,SubDevice ID,Device Class,Device Class Name," +
				"Passthru Capable,Parent Device,NUMA Node"}},
		Types: map[string][]cliField{"PCIDevice": {{Display: "Address"}, {Display: "Segment"}, {Display: "Bus"},
			{Display: "Slot"}, {Display: "Function"}, {Display: "VMkernel Name"}, {Display: "Vendor Name"},
			{Display: "Device Name"}, {Display: "Configured Owner"}, {Display: "Current Owner"},
			{Display: "Vendor ID"}, {Display: "Device ID"}, {Display: "SubVendor ID"}, {Display: "SubDevice ID"},
			{Display: "Device Class"}, {Display: "Device Class Name"}, {Display: "Passthru Capable", Type: "boolean"},
			{Display: "Parent Device"}, {Display: "NUMA Node", Type: "long"}}},
	},
	{
		Path: "hardware.pci.pcipassthru", Help: "PCI device passthru configuration.",
		Methods: []cliMethod{
			{Name: "list", Help: "Display PCI device passthru configuration.",
				Result: "PCIPassthru", List: true, Formatter: "table", Fields: "Device ID,Enabled", Run: passthruList},
			{Name: "set", Help: "Configure PCI device for passthrough.",
				Params: []cliParam{
					{Name: "deviceid", Display: "device-id", Aliases: []string{"-d", "--device-id"}, Required: true,
						Help: "The PCI device address (segment:bus:slot.function)."},
					{Name: "enable", Display: "enable", Aliases: []string{"-e", "--enable"}, Type: "boolean", Required: true,
						Help: "Enable or disable passthru for the device."},
					{Name: "applynow", Display: "apply-now", Aliases: []string{"-a", "--apply-now"}, Type: "boolean",
						Flag: true, Help: "Apply the change now instead of at the next reboot."}},
				Result: "boolean", Run: passthruSet},
		},
		Types: map[string][]cliField{"PCIPassthru": {{Display: "Device ID"}, {Display: "Enabled", Type: "boolean"}}},
	},
	{
		Path: "graphics.device", Help: "Graphics device information.",
		Methods: []cliMethod{{Name: "list", Help: "List all graphics devices on the host.",
			Result: "Device", List: true, Formatter: "table",
			Fields: "Device ID,Vendor Name,Device Name,Module Name,Graphics Type,Memory Size (KB),Number of VMs",
			Run:    graphicsDeviceList}},
		Types: map[string][]cliField{"Device": {{Display: "Device ID"}, {Display: "Vendor Name"}, {Display: "Device Name"},
			{Display: "Module Name"}, {Display: "Graphics Type"}, {Display: "Memory Size (KB)", Type: "long"},
			{Display: "Number of VMs", Type: "long"}}},
	},
	{
		Path: "network.nic", Help: "Operations having to do with the configuration of Network Interface Card.",
		Methods: []cliMethod{{Name: "list", Help: "This command will list the Physical NICs currently installed and loaded on the system.",
			Result: "PhysicalNic", List: true, Formatter: "table",
			Fields: "Name,PCI Device,Driver,Admin Status,Link Status,Speed,Duplex,MAC Address,MTU,Description",
			Run:    networkNicList}},
		Types: map[string][]cliField{"PhysicalNic": {{Display: "Name"}, {Display: "PCI Device"}, {Display: "Driver"},
			{Display: "Admin Status"}, {Display: "Link Status"}, {Display: "Speed", Type: "long"}, {Display: "Duplex"},
			{Display: "MAC Address"}, {Display: "MTU", Type: "long"}, {Display: "Description"}}},
	},
	{
		Path: "rdma.device", Help: "Operations on RDMA devices.",
		Methods: []cliMethod{{Name: "list", Help: "List the logical RDMA devices currently registered on the system.",
			Result: "RdmaDevice", List: true, Formatter: "table",
			Fields: "Name,Driver,State,MTU,Speed,Paired Uplink,Description", Run: rdmaDeviceList}},
		Types: map[string][]cliField{"RdmaDevice": {{Display: "Name"}, {Display: "Driver"}, {Display: "State"},
			{Display: "MTU", Type: "long"}, {Display: "Speed"}, {Display: "Paired Uplink"}, {Display: "Description"}}},
	},
	{
		Path: "storage.core.device.vaai.status", Help: "Operations on VAAI status of devices.",
		Methods: []cliMethod{{Name: "get", Help: "Display the current hardware acceleration status of devices.",
			Params: []cliParam{{Name: "device", Display: "device", Aliases: []string{"-d", "--device"},
				Help: "Filter the output of the command to limit the output to a specific device."}},
			Result: "Device", List: true, Formatter: "simple",
			Fields: "Device,VAAI Plugin Name,ATS Status,Clone Status,Zero Status,Delete Status", Run: vaaiStatusGet}},
		Types: map[string][]cliField{"Device": {{Display: "Device"}, {Display: "VAAI Plugin Name"},
			{Display: "ATS Status"}, {Display: "Clone Status"}, {Display: "Zero Status"}, {Display: "Delete Status"}}},
	},
	{
		Path: "software.vib", Help: "Install, update, remove, or display individual VIB packages",
		Methods: []cliMethod{{Name: "list", Help: "Lists the installed VIB packages",
			Params: []cliParam{{Name: "rebootingimage", Display: "rebooting-image", Aliases: []string{"--rebooting-image"},
				Type: "boolean", Flag: true, Help: "Displays information for the ESXi image which becomes active after a reboot."}},
			Result: "VIBSummaryExt", List: true, Formatter: "table",
			Fields: "Name,Version,Vendor,Acceptance Level,Install Date", Run: softwareVibList},
			{Name: "install", Help: "Installs VIB packages from a URL or depot. VIBs may be installed, upgraded, or downgraded.",
				Params: []cliParam{{Name: "depot", Display: "depot", Aliases: []string{"-d", "--depot"}, Type: "string[]",
					Help: "Specifies full remote URLs of the depot index.xml or server file path pointing to an offline bundle .zip file."}},
				Result: "InstallationResult", Formatter: "simple",
				Fields: "Message,Reboot Required,VIBs Installed,VIBs Removed,VIBs Skipped", Run: softwareVibInstall},
			{Name: "update", Help: "Update installed VIBs to newer VIB packages. No new VIBs will be installed, only updates.",
				Params: []cliParam{{Name: "depot", Display: "depot", Aliases: []string{"-d", "--depot"}, Type: "string[]",
					Help: "Specifies full remote URLs of the depot index.xml or server file path pointing to an offline bundle .zip file."}},
				Result: "InstallationResult", Formatter: "simple",
				Fields: "Message,Reboot Required,VIBs Installed,VIBs Removed,VIBs Skipped", Run: softwareVibUpdate}},
		Types: map[string][]cliField{"VIBSummaryExt": {{Display: "Name"}, {Display: "Version"}, {Display: "Vendor"},
			{Display: "Acceptance Level"}, {Display: "Install Date"}},
			"InstallationResult": installationResult},
	},
	{
		Path: "software.profile", Help: "Display, install, update or validate image profiles",
		Methods: []cliMethod{{Name: "update", Help: "Updates the host with VIBs from an image profile in a depot." +
			" Installed VIBs may be upgraded (or downgraded if --allow-downgrades is specified), but they will not" +
			" be removed. Any VIBs in the image profile which are not related to any installed VIBs will be added" +
			" to the host.",
			Params: []cliParam{
				{Name: "depot", Display: "depot", Aliases: []string{"-d", "--depot"}, Type: "string[]", Required: true,
					Help: "Specifies full remote URLs of the depot index.xml or server file path pointing to an offline bundle .zip file."},
				{Name: "profile", Display: "profile", Aliases: []string{"-p", "--profile"}, Required: true,
					Help: "Specifies the name of the image profile to update the host with."},
				{Name: "allowdowngrades", Display: "allow-downgrades", Aliases: []string{"--allow-downgrades"},
					Type: "boolean", Flag: true,
					Help: "If this option is specified, then the VIBs from the image profile which update, downgrade, or are new to the host will be installed."}},
			Result: "InstallationResult", Formatter: "simple",
			Fields: "Message,Reboot Required,VIBs Installed,VIBs Removed,VIBs Skipped", Run: softwareProfileUpdate}},
		Types: map[string][]cliField{"InstallationResult": installationResult},
	},
}

// installationResult is esxcli's InstallationResult (software vib install|update, profile update).
var installationResult = []cliField{{Display: "Message"}, {Display: "Reboot Required", Type: "boolean"},
	{Display: "VIBs Installed", Type: "string[]"}, {Display: "VIBs Removed", Type: "string[]"},
	{Display: "VIBs Skipped", Type: "string[]"}}

// esxiPatch is the patch level of known ESXi builds (ESXi release notes; 7.0 Update 3c is 7.0.3-0.20.19193900).
var esxiPatch = map[string]string{"19193900": "20", "19482537": "35", "20036589": "0"}

func systemVersionGet(hs *simulator.HostSystem, _ cliArgs) (cliResult, *cliFault) {
	p := hs.Config.Product
	update := "0"
	if parts := strings.Split(p.Version, "."); len(parts) > 2 {
		update = parts[2]
	}
	return cliResult{Rows: []cliRow{row("Product", p.Name, "Version", p.Version,
		"Build", "Releasebuild-"+p.Build, "Update", update, "Patch", orDefault(esxiPatch[p.Build], "0"))}}, nil
}

func hostOptions(hs *simulator.HostSystem) *HostOptions {
	if hs.ConfigManager.AdvancedOption == nil {
		return nil
	}
	options, _ := simulator.Map.Get(*hs.ConfigManager.AdvancedOption).(*HostOptions)
	return options
}

// kernelList: each VMkernel.Boot.* option the host declares, Configured (the
// option's value, what the next boot uses) and Runtime (what this boot runs
// with, which changes only at a reboot).
func kernelList(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	options := hostOptions(hs)
	if options == nil {
		return cliResult{}, cliError("Unable to reach the host's configuration")
	}
	name, filtered := args.one("option")
	var rows []cliRow
	if opt := options.find(atsOption); opt != nil && (!filtered || name == "atsSupport") {
		runtime, _ := atsRuntime.Load(hs.Self.Value)
		rows = append(rows, row("Name", "atsSupport", "Type", "Bool", "Configured", upperBool(truthy(opt.Value)),
			"Runtime", upperBool(runtime == true), "Default", "FALSE",
			"Description", "Enable Support for PCIe Address Translation Services (ATS)"))
	}
	return cliResult{Rows: rows}, nil
}

// kernelSet changes the Configured value through the host's OptionManager (one model with the API view).
func kernelSet(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	options := hostOptions(hs)
	setting, _ := args.one("setting")
	if options == nil || setting != "atsSupport" || options.find(atsOption) == nil {
		return cliResult{}, cliError("Invalid Key Name: %s", setting)
	}
	raw, _ := args.one("value")
	on, ok := parseBool(raw)
	if !ok {
		return cliResult{}, cliError("Invalid value for setting %s: %s (expected TRUE or FALSE)", setting, raw)
	}
	var value interface{} = on
	for _, def := range options.SupportedOption {
		if _, isString := def.OptionType.(*types.StringOption); isString && def.Key == atsOption {
			value = upperBool(on)
		}
	}
	body := options.UpdateOptions(&types.UpdateOptions{
		ChangedValue: []types.BaseOptionValue{&types.OptionValue{Key: atsOption, Value: value}},
	})
	if f := body.Fault(); f != nil {
		return cliResult{}, cliError("%s", f.String)
	}
	return cliResult{Simple: "true"}, nil
}

// passthruOf is the host's passthrough state of one PCI function.
func passthruOf(hs *simulator.HostSystem, id string) *types.HostPciPassthruInfo {
	for _, info := range hs.Config.PciPassthruInfo {
		if i := info.GetHostPciPassthruInfo(); i.Id == id {
			return i
		}
	}
	return nil
}

func className(class int16) string {
	switch uint16(class) {
	case 0x0302:
		return "3D controller"
	case 0x0300:
		return "VGA compatible controller"
	case 0x0200:
		return "Ethernet controller"
	case 0x0207:
		return "Infiniband controller"
	case 0x0604:
		return "PCI bridge"
	case 0x0600:
		return "Host bridge"
	case 0x0106:
		return "SATA controller"
	}
	return "Unknown"
}

// vmkernelNames are the names ESXi gives the functions it claims (vmnicN, vmhbaN), by PCI address.
func vmkernelNames(hs *simulator.HostSystem) map[string]string {
	names := map[string]string{}
	nic, hba := 0, 0
	devs := append([]types.HostPciDevice(nil), hs.Hardware.PciDevice...)
	sort.Slice(devs, func(i, j int) bool { return devs[i].Id < devs[j].Id })
	for _, d := range devs {
		switch uint16(d.ClassId) >> 8 {
		case 0x02:
			names[d.Id] = fmt.Sprintf("vmnic%d", nic)
			nic++
		case 0x01:
			names[d.Id] = fmt.Sprintf("vmhba%d", hba)
			hba++
		}
	}
	return names
}

// owner is the PCI function's owner as esxcli names it: VM Passthru or VMkernel.
func owner(passthru bool) string {
	if passthru {
		return "VM Passthru"
	}
	return "VMkernel"
}

// claimedByVMkernel: the function is not handed to VMs (passthrough not active).
func claimedByVMkernel(hs *simulator.HostSystem, id string) bool {
	p := passthruOf(hs, id)
	return p == nil || !p.PassthruActive
}

func hardwarePciList(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	var class int64 = -1
	if v, ok := args.one("class"); ok {
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			return cliResult{}, &cliFault{Kind: "InvalidRequest", Msg: []string{"class: not a number: " + v}}
		}
		class = n
	}
	names := vmkernelNames(hs)
	numa := map[string]int{}
	if hs.Hardware.NumaInfo != nil {
		for _, node := range hs.Hardware.NumaInfo.NumaNode {
			for _, id := range node.PciId {
				numa[id] = int(node.TypeId)
			}
		}
	}
	var rows []cliRow
	for _, d := range hs.Hardware.PciDevice {
		if class >= 0 && int64(uint16(d.ClassId)) != class && int64(uint16(d.ClassId)>>8) != class {
			continue
		}
		p := passthruOf(hs, d.Id)
		capable, enabled, active := false, false, false
		if p != nil {
			capable, enabled, active = p.PassthruCapable, p.PassthruEnabled, p.PassthruActive
		}
		name := names[d.Id]
		if active {
			name = ""
		}
		r := row("Address", d.Id, "Segment", "0x0000", "Bus", fmt.Sprintf("0x%02x", d.Bus),
			"Slot", fmt.Sprintf("0x%02x", d.Slot), "Function", fmt.Sprintf("0x%x", d.Function),
			"VMkernel Name", name, "Vendor Name", d.VendorName, "Device Name", d.DeviceName,
			"Configured Owner", owner(enabled), "Current Owner", owner(active),
			"Vendor ID", fmt.Sprintf("0x%04x", uint16(d.VendorId)), "Device ID", fmt.Sprintf("0x%04x", uint16(d.DeviceId)),
			"SubVendor ID", fmt.Sprintf("0x%04x", uint16(d.SubVendorId)),
			"SubDevice ID", fmt.Sprintf("0x%04x", uint16(d.SubDeviceId)),
			"Device Class", fmt.Sprintf("0x%04x", uint16(d.ClassId)), "Device Class Name", className(d.ClassId),
			"Passthru Capable", trueFalse(capable), "Parent Device", d.ParentBridge)
		if n, ok := numa[d.Id]; ok {
			r.set("NUMA Node", strconv.Itoa(n))
		}
		rows = append(rows, r)
	}
	return cliResult{Rows: rows}, nil
}

func passthruList(hs *simulator.HostSystem, _ cliArgs) (cliResult, *cliFault) {
	var rows []cliRow
	for _, info := range hs.Config.PciPassthruInfo {
		if i := info.GetHostPciPassthruInfo(); i.PassthruCapable {
			rows = append(rows, row("Device ID", i.Id, "Enabled", trueFalse(i.PassthruEnabled)))
		}
	}
	return cliResult{Rows: rows}, nil
}

// passthruSet goes through HostPciPassthruSystem.UpdatePassthruConfig (rack.go), so the API
// view (config.pciPassthruInfo, summary.rebootRequired) and esxcli stay one model.
func passthruSet(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	id, _ := args.one("deviceid")
	raw, _ := args.one("enable")
	enable, ok := parseBool(raw)
	if !ok {
		return cliResult{}, &cliFault{Kind: "InvalidRequest", Msg: []string{"enable: not a boolean: " + raw}}
	}
	applyNow := false
	if v, ok := args.one("applynow"); ok {
		applyNow, _ = parseBool(v)
	}
	if hs.ConfigManager.PciPassthruSystem == nil {
		return cliResult{}, cliError("Unable to configure passthrough on this host")
	}
	pts, ok := simulator.Map.Get(*hs.ConfigManager.PciPassthruSystem).(*PciPassthruSystem)
	if !ok {
		return cliResult{}, cliError("Unable to configure passthrough on this host")
	}
	if passthruOf(hs, id) == nil {
		return cliResult{}, cliError("Device %s not found", id)
	}
	body := pts.UpdatePassthruConfig(&types.UpdatePassthruConfig{Config: []types.BaseHostPciPassthruConfig{
		&types.HostPciPassthruConfig{Id: id, PassthruEnabled: enable, ApplyNow: &applyNow}}})
	if f := body.Fault(); f != nil {
		return cliResult{}, cliError("%s", f.String)
	}
	return cliResult{Simple: "true"}, nil
}

// gpuMemoryKB is the frame buffer of the GPU models the rack uses (NVIDIA data sheets), in KB.
func gpuMemoryKB(name string) int64 {
	for _, gb := range []int64{80, 48, 40, 32, 24, 16} {
		if strings.Contains(name, fmt.Sprintf("%dGB", gb)) || strings.Contains(name, fmt.Sprintf("%d GB", gb)) {
			return gb << 20
		}
	}
	return 0
}

// graphicsDeviceList: the host's GPUs. With the vGPU manager installed and the
// GPU kept by the VMkernel, the nvidia module drives it with the host's active
// graphics type (HostGraphicsManager, graphics.go); a GPU in passthrough or
// without a host driver shows no module, type Basic.
func graphicsDeviceList(hs *simulator.HostSystem, _ cliArgs) (cliResult, *cliFault) {
	active, _ := activeGraphics.Load(hs.Self.Value)
	managed := hasVGPUManager(hs)
	vms := map[string]int{}
	for _, ref := range hs.Vm {
		vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine)
		if !ok || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
			continue
		}
		for _, dev := range vm.Config.Hardware.Device {
			if pt, ok := dev.(*types.VirtualPCIPassthrough); ok {
				if b, ok := pt.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
					vms[b.Id]++
				}
			}
		}
	}
	var rows []cliRow
	for _, d := range hs.Hardware.PciDevice {
		if uint16(d.ClassId)>>8 != 0x03 {
			continue
		}
		module, kind := "None", "Basic"
		if managed && claimedByVMkernel(hs, d.Id) {
			module = "nvidia"
			if active == "sharedDirect" {
				kind = "SharedPassthru"
			} else {
				kind = "Shared"
			}
		}
		rows = append(rows, row("Device ID", d.Id, "Vendor Name", d.VendorName, "Device Name", d.DeviceName,
			"Module Name", module, "Graphics Type", kind,
			"Memory Size (KB)", strconv.FormatInt(gpuMemoryKB(d.DeviceName), 10),
			"Number of VMs", strconv.Itoa(vms[d.Id])))
	}
	return cliResult{Rows: rows}, nil
}

// nicDriver is the inbox driver ESXi 7.0 binds to the NIC (VMware Compatibility Guide).
func nicDriver(d types.HostPciDevice) string {
	if uint16(d.VendorId) == mellanoxVendor {
		return "nmlx5_core"
	}
	return "unknown"
}

// nicSpeed is the NIC's port speed in Mb/s from its model name (ConnectX-6 Dx/VPI 100 or 200 GbE).
func nicSpeed(name string) int {
	for _, g := range []int{400, 200, 100, 50, 40, 25, 10} {
		if strings.Contains(name, fmt.Sprintf("%dG", g)) || strings.Contains(name, fmt.Sprintf("%d G", g)) {
			return g * 1000
		}
	}
	return 100000
}

// networkNicList: the NIC functions the VMkernel claims (a function in passthrough has no vmnic).
func networkNicList(hs *simulator.HostSystem, _ cliArgs) (cliResult, *cliFault) {
	names := vmkernelNames(hs)
	var rows []cliRow
	for _, d := range hs.Hardware.PciDevice {
		if uint16(d.ClassId)>>8 != 0x02 || !claimedByVMkernel(hs, d.Id) {
			continue
		}
		rows = append(rows, row("Name", names[d.Id], "PCI Device", d.Id, "Driver", nicDriver(d),
			"Admin Status", "Up", "Link Status", "Up", "Speed", strconv.Itoa(nicSpeed(d.DeviceName)),
			"Duplex", "Full", "MAC Address", managementMAC(hs.Name+d.Id), "MTU", "9000",
			"Description", d.VendorName+" "+d.DeviceName))
	}
	return cliResult{Rows: rows}, nil
}

// rdmaDeviceList: one vmrdma per RDMA-capable uplink the host claims (nmlx5_rdma
// pairs with an nmlx5_core vmnic); a NIC in passthrough belongs to a VM and is absent.
func rdmaDeviceList(hs *simulator.HostSystem, _ cliArgs) (cliResult, *cliFault) {
	if !hostHasVIB(hs, "nmlx5-rdma") {
		return cliResult{}, nil
	}
	names := vmkernelNames(hs)
	var rows []cliRow
	n := 0
	for _, d := range hs.Hardware.PciDevice {
		if uint16(d.ClassId)>>8 != 0x02 || uint16(d.VendorId) != mellanoxVendor || !claimedByVMkernel(hs, d.Id) {
			continue
		}
		rows = append(rows, row("Name", fmt.Sprintf("vmrdma%d", n), "Driver", "nmlx5_rdma", "State", "Active",
			"MTU", "4096", "Speed", fmt.Sprintf("%d Gbps", nicSpeed(d.DeviceName)/1000),
			"Paired Uplink", names[d.Id], "Description", d.VendorName+" "+d.DeviceName))
		n++
	}
	return cliResult{Rows: rows}, nil
}

// vaaiStatus is esxcli's word for the LUN's vStorageSupport (ScsiLun.vStorageSupport, ScsiLunVStorageSupportStatus).
func vaaiStatus(support string) string {
	switch support {
	case string(types.ScsiLunVStorageSupportStatusVStorageSupported):
		return "supported"
	case string(types.ScsiLunVStorageSupportStatusVStorageUnsupported):
		return "unsupported"
	}
	return "unknown"
}

// vaaiStatusGet: the hardware acceleration status of the host's disks, from the same
// ScsiLun objects the API shows (config.storageDevice.scsiLun[].vStorageSupport).
func vaaiStatusGet(hs *simulator.HostSystem, args cliArgs) (cliResult, *cliFault) {
	want, filtered := args.one("device")
	var rows []cliRow
	if hs.Config.StorageDevice != nil {
		for _, l := range hs.Config.StorageDevice.ScsiLun {
			lun := l.GetScsiLun()
			if lun.LunType != "disk" || (filtered && lun.CanonicalName != want) {
				continue
			}
			status := vaaiStatus(lun.VStorageSupport)
			plugin := ""
			if status == "supported" {
				plugin = "VMW_VAAIP_T10"
			}
			rows = append(rows, row("Device", lun.CanonicalName, "VAAI Plugin Name", plugin, "ATS Status", status,
				"Clone Status", status, "Zero Status", status, "Delete Status", status))
		}
	}
	if filtered && len(rows) == 0 {
		return cliResult{}, cliError("Unknown device %s", want)
	}
	return cliResult{Rows: rows}, nil
}

func softwareVibList(hs *simulator.HostSystem, _ cliArgs) (cliResult, *cliFault) {
	var rows []cliRow
	for _, v := range softwareOf(hs) {
		rows = append(rows, row("Name", v.Name, "Version", v.Version, "Vendor", v.Vendor,
			"Acceptance Level", v.AcceptanceLevel, "Install Date", v.InstallDate))
	}
	return cliResult{Rows: rows}, nil
}
