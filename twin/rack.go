package main

import (
	"context"
	"fmt"
	"io/ioutil"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// atsOption is the VMkernel boot option behind `esxcli system settings kernel
// set -s atsSupport`; as an advanced option it is VMkernel.Boot.atsSupport (the
// way community.vmware handles VMkernel.Boot.hyperthreadingMitigation). Like
// every VMkernel.Boot.* option it takes effect at the next boot.
const atsOption = "VMkernel.Boot.atsSupport"

// Rack is the built simulator inventory.
type Rack struct {
	Model *simulator.Model
	Hosts map[string]*simulator.HostSystem
}

// BuildRack creates datacenter, cluster, hosts (with the description's PCI
// devices), one shared datastore and any pre-existing VMs.
func BuildRack(ctx context.Context, desc *Description) (*Rack, error) {
	rebootTiming = desc.Reboot
	setClock(desc.Clock) // clock.go
	model := simulator.VPX()
	model.Datacenter = 0
	model.Portgroup = 0
	model.Host = 0
	model.Cluster = 0
	model.ClusterHost = 0
	model.Datastore = 0
	model.Machine = 0
	model.Autostart = false
	if err := model.Create(); err != nil {
		return nil, err
	}
	setVcenterVersion()
	c, err := vim25.NewClient(ctx, model.Service)
	if err != nil {
		return nil, err
	}
	dcName := orDefault(desc.Datacenter, "DC0")
	clusterName := orDefault(desc.Cluster, "cluster0")
	dc, err := object.NewRootFolder(c).CreateDatacenter(ctx, dcName)
	if err != nil {
		return nil, err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, err
	}
	cluster, err := folders.HostFolder.CreateCluster(ctx, clusterName, types.ClusterConfigSpecEx{})
	if err != nil {
		return nil, err
	}
	dsDir, err := ioutil.TempDir("", "rackcert-vcsim-ds-")
	if err != nil {
		return nil, err
	}
	rack := &Rack{Model: model, Hosts: map[string]*simulator.HostSystem{}}
	setDepots(desc.Depots) // hostsoftware.go: what software vib install -d can read
	for i := range desc.Hosts {
		hd := &desc.Hosts[i]
		task, err := cluster.AddHost(ctx, types.HostConnectSpec{HostName: hd.Name}, true, nil, nil)
		if err != nil {
			return nil, err
		}
		info, err := task.WaitForResult(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("adding host %s: %v", hd.Name, err)
		}
		ref := info.Result.(types.ManagedObjectReference)
		hs := simulator.Map.Get(ref).(*simulator.HostSystem)
		configureHost(hs, hd)
		setHostIdentity(hs, hd, i) // hostidentity.go: DNS and vmk0 agree with the inventory name
		setHostSoftware(hs, hd)    // hostsoftware.go: the VIBs its hardware needs
		rack.Hosts[hd.Name] = hs
		dss, err := object.NewHostSystem(c, ref).ConfigManager().DatastoreSystem(ctx)
		if err != nil {
			return nil, err
		}
		if _, err = dss.CreateLocalDatastore(ctx, "LocalDS_0", dsDir); err != nil {
			return nil, err
		}
	}
	wrapEnvironmentBrowser(simulator.Map.Get(cluster.Reference()).(*simulator.ClusterComputeResource))
	shapeCluster(simulator.Map.Get(cluster.Reference()).(*simulator.ClusterComputeResource))
	wrapSearchIndex(*c.ServiceContent.SearchIndex) // searchindex.go
	pageLimit = desc.PageSize
	wrapPropertyCollector(c.ServiceContent.PropertyCollector)
	pool, err := cluster.ResourcePool(ctx)
	if err != nil {
		return nil, err
	}
	if err := addSiteObjects(ctx, c, rack, desc); err != nil {
		return nil, err
	}
	for _, td := range desc.Templates {
		if err := createTemplate(ctx, c, folders, pool, rack, td); err != nil {
			return nil, fmt.Errorf("creating template %s: %v", td.Name, err)
		}
	}
	agents := -1
	if desc.AgentVMs != nil {
		agents = *desc.AgentVMs
	}
	var hosts []*simulator.HostSystem
	for _, hd := range desc.Hosts {
		hosts = append(hosts, rack.Hosts[hd.Name])
	}
	if err := createAgents(ctx, c, folders, pool, clusterName, hosts, agents); err != nil {
		return nil, fmt.Errorf("creating the vCLS agent VMs: %v", err)
	}
	for _, vd := range desc.VMs {
		if err := createVM(ctx, c, folders, pool, rack, vd); err != nil {
			return nil, fmt.Errorf("creating VM %s: %v", vd.Name, err)
		}
	}
	return rack, nil
}

func orDefault(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}

func createVM(ctx context.Context, c *vim25.Client, folders *object.DatacenterFolders,
	pool *object.ResourcePool, rack *Rack, vd VMDesc) error {
	hs, ok := rack.Hosts[vd.Host]
	if !ok {
		return fmt.Errorf("no host %s", vd.Host)
	}
	var err error
	spec := types.VirtualMachineConfigSpec{
		Name:     vd.Name,
		GuestId:  "ubuntu64Guest",
		NumCPUs:  vd.CPUs,
		MemoryMB: vd.MemoryMB,
		Firmware: orDefault(vd.Firmware, "bios"),
		Files:    &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}
	if vd.DiskGB > 0 {
		if spec.DeviceChange, err = diskSpec("LocalDS_0", vd.DiskGB); err != nil {
			return err
		}
	}
	host := object.NewHostSystem(c, hs.Reference())
	task, err := folders.VmFolder.CreateVM(ctx, spec, pool, host)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	if vd.PowerOn {
		vm := object.NewVirtualMachine(c, info.Result.(types.ManagedObjectReference))
		task, err = vm.PowerOn(ctx)
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	}
	return nil
}

// configureHost gives a simulator host the description's identity and hardware.
func configureHost(hs *simulator.HostSystem, hd *HostDesc) {
	simulator.Map.WithLock(hs, func() {
		hw := *hs.Hardware
		hw.SystemInfo.Vendor = hd.Vendor
		hw.SystemInfo.Model = hd.Model
		if hd.MemoryGB > 0 {
			hw.MemorySize = hd.MemoryGB << 30
		}
		nodes := hd.NumaNodes
		if nodes < 1 {
			nodes = 1
		}
		numa := &types.HostNumaInfo{Type: "NUMA", NumNodes: int32(nodes)}
		for n := 0; n < nodes; n++ {
			numa.NumaNode = append(numa.NumaNode, types.HostNumaNode{
				TypeId:            byte(n),
				MemoryRangeBegin:  int64(n) * (hw.MemorySize / int64(nodes)),
				MemoryRangeLength: hw.MemorySize / int64(nodes),
			})
		}
		hw.PciDevice = nil
		var passthru []types.BaseHostPciPassthruInfo
		for _, p := range hd.PCI {
			hw.PciDevice = append(hw.PciDevice, pciDevice(p))
			if p.Numa >= 0 && p.Numa < nodes {
				numa.NumaNode[p.Numa].PciId = append(numa.NumaNode[p.Numa].PciId, p.ID)
			}
			passthru = append(passthru, &types.HostPciPassthruInfo{
				Id:              p.ID,
				DependentDevice: p.ID,
				PassthruCapable: p.PassthruCapable,
				PassthruEnabled: p.PassthruEnabled,
				PassthruActive:  p.PassthruActive,
			})
		}
		hw.NumaInfo = numa
		hs.Hardware = &hw
		shapeHostCPU(hs, &hw, hd.CPU) // shapes.go

		summary := *hs.Summary.Hardware
		summary.Vendor = hd.Vendor
		summary.Model = hd.Model
		summary.MemorySize = hw.MemorySize
		hs.Summary.Hardware = &summary

		cfg := hs.Config
		product := cfg.Product
		product.Name = "VMware ESXi"
		product.Version = orDefault(hd.Version, "7.0.3")
		product.Build = orDefault(hd.Build, "19193900")
		product.FullName = fmt.Sprintf("VMware ESXi %s build-%s", product.Version, product.Build)
		product.ApiVersion = apiVersion(product.Version)
		cfg.Product = product
		hs.Summary.Config.Product = &product
		cfg.PciPassthruInfo = passthru
		cfg.SharedPassthruGpuTypes = hd.VgpuTypes
		if hd.NoVGPUManager { // offered only once the manager runs (hostsoftware.go)
			cfg.SharedPassthruGpuTypes = nil
		}
		hs.Runtime.InMaintenanceMode = hd.Maintenance
		rebind := hd.RebindWithoutReboot
		hs.Capability = &types.HostCapability{DeviceRebindWithoutRebootSupported: &rebind}

		options := newHostOptions(hs, hd)
		bootATS(hs, options) // esxcli.go: the value this boot runs with
		if hd.NoEsxcli {
			noEsxcli.Store(hs.Self.Value, true)
		}
		availability.own(types.ManagedObjectReference{Type: "ReflectManagedMethodExecuter",
			Value: executerPrefix + hs.Self.Value}, hs)
		availability.own(types.ManagedObjectReference{Type: "InternalDynamicTypeManager",
			Value: typeMgrPrefix + hs.Self.Value}, hs)
		ref := simulator.Map.Put(options).Reference()
		hs.ConfigManager.AdvancedOption = &ref
		cfg.Option = options.Setting
		cfg.OptionDef = options.SupportedOption

		pts := &PciPassthruSystem{host: hs}
		pts.Self = types.ManagedObjectReference{
			Type: "HostPciPassthruSystem", Value: "pciPassthruSystem-" + hs.Self.Value,
		}
		pts.PciPassthruInfo = snapshotPassthru(passthru)
		ptsRef := simulator.Map.Put(pts).Reference()
		hs.ConfigManager.PciPassthruSystem = &ptsRef
		gmRef := newGraphicsManager(hs, hd.GraphicsType)
		hs.ConfigManager.GraphicsManager = &gmRef
		availability.own(ptsRef, hs)
		availability.own(ref, hs)
		addDeviceGroups(hs, hd) // devicegroups.go: vSphere 8 hosts list their vendor device groups
		addHostManagers(hs)     // hostobjects.go: the managers every ESXi host has
	})
}

func apiVersion(version string) string {
	if strings.Count(version, ".") == 2 {
		return version + ".0"
	}
	return version
}

func pciDevice(p PCIDesc) types.HostPciDevice {
	var bus, slot, fn int
	_, _ = fmt.Sscanf(p.ID[5:], "%x:%x.%x", &bus, &slot, &fn)
	// vSphere types vendor and device ids as xsd:short: ids above 0x7fff arrive negative.
	return types.HostPciDevice{
		Id:           p.ID,
		ClassId:      int16(p.ClassID),
		Bus:          byte(bus),
		Slot:         byte(slot),
		Function:     byte(fn),
		VendorId:     int16(uint16(p.VendorID)),
		SubVendorId:  int16(uint16(p.SubVendorID)),
		VendorName:   p.VendorName,
		DeviceId:     int16(uint16(p.DeviceID)),
		SubDeviceId:  int16(uint16(p.SubDeviceID)),
		ParentBridge: p.ParentBridge,
		DeviceName:   p.DeviceName,
	}
}

// HostOptions is a per-host advanced-option manager. The simulator gives all
// hosts one shared list; a rack needs each host's own ATS setting. Changing a
// VMkernel.Boot.* option marks the host as needing a reboot, as ESXi does.
//
// The manager is embedded by value: the PropertyCollector (and SearchIndex)
// find an object's properties through its first embedded field down to the mo
// type, and panic on a pointer ("does not have an embedded mo type").
type HostOptions struct {
	simulator.OptionManager
	host *simulator.HostSystem
}

func newHostOptions(hs *simulator.HostSystem, hd *HostDesc) *HostOptions {
	var settings []types.BaseOptionValue
	for _, opt := range hs.Config.Option {
		o := opt.GetOptionValue()
		settings = append(settings, &types.OptionValue{Key: o.Key, Value: o.Value})
	}
	var defs []types.OptionDef
	if hd.ATSOption == nil || *hd.ATSOption {
		settings = append(settings, &types.OptionValue{Key: atsOption, Value: atsValue(hd.ATSType, hd.ATS)})
		defs = append(defs, atsOptionDef(hd.ATSType))
	}
	om := simulator.NewOptionManager(nil, settings).(*simulator.OptionManager)
	om.Self = types.ManagedObjectReference{Type: "OptionManager", Value: "hostOptions-" + hs.Self.Value}
	om.SupportedOption = defs
	return &HostOptions{OptionManager: *om, host: hs}
}

func (m *HostOptions) find(key string) *types.OptionValue {
	for _, opt := range m.Setting {
		if o := opt.GetOptionValue(); o.Key == key {
			return o
		}
	}
	return nil
}

// PciPassthruSystem is HostPciPassthruSystem, which govmomi's simulator lacks.
// passthruEnabled changes at once. passthruActive follows it at once when the
// change applies now, else at the next host reboot (RebootHost_Task): vSphere
// API reference, HostPciPassthruConfig.applyNow (7.0): "If set, the changes are
// applied immediately ...; if unset, the changes are applied immediately if the
// host supports it" (HostCapability.deviceRebindWithoutRebootSupported).
type PciPassthruSystem struct {
	mo.HostPciPassthruSystem
	host *simulator.HostSystem
}

func (p *PciPassthruSystem) find(id string) *types.HostPciPassthruInfo {
	for _, info := range p.host.Config.PciPassthruInfo {
		if i := info.GetHostPciPassthruInfo(); i.Id == id {
			return i
		}
	}
	return nil
}

// UpdatePassthruConfig enables or disables passthrough per PCI function.
func (p *PciPassthruSystem) UpdatePassthruConfig(req *types.UpdatePassthruConfig) soap.HasFault {
	body := new(methods.UpdatePassthruConfigBody)
	changed := false
	for _, c := range req.Config {
		cfg := c.GetHostPciPassthruConfig()
		info := p.find(cfg.Id)
		if info == nil {
			body.Fault_ = simulator.Fault(fmt.Sprintf("no PCI device %s on host %s", cfg.Id, p.host.Name),
				&types.InvalidArgument{InvalidProperty: "config.id"})
			return body
		}
		if cfg.PassthruEnabled && !info.PassthruCapable {
			body.Fault_ = simulator.Fault(fmt.Sprintf("PCI device %s is not passthrough capable", cfg.Id),
				&types.HostConfigFault{})
			return body
		}
		rebind := p.host.Capability != nil && p.host.Capability.DeviceRebindWithoutRebootSupported != nil &&
			*p.host.Capability.DeviceRebindWithoutRebootSupported
		now := rebind
		if cfg.ApplyNow != nil {
			now = *cfg.ApplyNow
		}
		if now && !rebind {
			body.Fault_ = simulator.Fault(fmt.Sprintf("host %s cannot rebind devices without a reboot"+
				" (deviceRebindWithoutRebootSupported is false)", p.host.Name), &types.HostConfigFault{})
			return body
		}
		if info.PassthruEnabled != cfg.PassthruEnabled {
			info.PassthruEnabled = cfg.PassthruEnabled
			if now {
				info.PassthruActive = cfg.PassthruEnabled
			} else {
				changed = true
			}
		}
	}
	if changed {
		simulator.Map.WithLock(p.host, func() { p.host.Summary.RebootRequired = true })
	}
	p.PciPassthruInfo = snapshotPassthru(p.host.Config.PciPassthruInfo)
	body.Res = new(types.UpdatePassthruConfigResponse)
	return body
}

// reboot applies what waits for a boot: passthrough activation and boot options.
func reboot(hs *simulator.HostSystem) {
	now := time.Now()
	for _, info := range hs.Config.PciPassthruInfo {
		i := info.GetHostPciPassthruInfo()
		i.PassthruActive = i.PassthruEnabled
	}
	bootGraphics(hs)
	bootSoftware(hs) // hostsoftware.go: an installed vGPU manager loads
	if options, ok := simulator.Map.Get(*hs.ConfigManager.AdvancedOption).(*HostOptions); ok {
		bootATS(hs, options) // esxcli's Runtime column changes only here
	}
	hs.Summary.RebootRequired = false
	hs.Runtime.BootTime = &now
}

// ConfigTargetBrowser answers QueryConfigTarget with the hosts' active
// passthrough devices (the simulator's list is empty), which is where a client
// finds the systemId a VirtualPCIPassthroughDeviceBackingInfo needs.
// (embedded by value, like HostOptions, so its own properties can be read).
type ConfigTargetBrowser struct {
	simulator.EnvironmentBrowser
	cluster *simulator.ClusterComputeResource
}

func wrapEnvironmentBrowser(cluster *simulator.ClusterComputeResource) {
	eb := simulator.Map.Get(*cluster.EnvironmentBrowser).(*simulator.EnvironmentBrowser)
	simulator.Map.Put(&ConfigTargetBrowser{EnvironmentBrowser: *eb, cluster: cluster})
}

// QueryConfigTarget adds pciPassthrough and shared GPU (vGPU) types per host.
func (b *ConfigTargetBrowser) QueryConfigTarget(ctx *simulator.Context, req *types.QueryConfigTarget) soap.HasFault {
	body := b.EnvironmentBrowser.QueryConfigTarget(ctx, req).(*methods.QueryConfigTargetBody)
	if body.Res == nil {
		return body
	}
	hosts := b.cluster.Host
	if req.Host != nil {
		hosts = []types.ManagedObjectReference{*req.Host}
	}
	target := body.Res.Returnval
	seenTypes := map[string]bool{}
	for _, ref := range hosts {
		hs, ok := simulator.Map.Get(ref).(*simulator.HostSystem)
		if !ok {
			continue
		}
		devices := map[string]types.HostPciDevice{}
		for _, d := range hs.Hardware.PciDevice {
			devices[d.Id] = d
		}
		for _, info := range hs.Config.PciPassthruInfo {
			i := info.GetHostPciPassthruInfo()
			if !i.PassthruActive {
				continue
			}
			d := devices[i.Id]
			target.PciPassthrough = append(target.PciPassthrough, &types.VirtualMachinePciPassthroughInfo{
				VirtualMachineTargetInfo: types.VirtualMachineTargetInfo{Name: d.DeviceName},
				PciDevice:                d,
				SystemId:                 passthruSystemID(hs),
			})
		}
		for _, t := range hs.Config.SharedPassthruGpuTypes {
			if !seenTypes[t] {
				seenTypes[t] = true
				target.SharedGpuPassthroughTypes = append(target.SharedGpuPassthroughTypes,
					types.VirtualMachinePciSharedGpuPassthroughInfo{
						VirtualMachineTargetInfo: types.VirtualMachineTargetInfo{Name: t}, Vgpu: t,
					})
			}
		}
	}
	return body
}
