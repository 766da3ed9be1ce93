package main

// Replay of a capture (`rackcert lab up --capture FILE`, `rackcert rehearse`).
//
// rackcert/lab/replay.py turns a capture into an ordinary description (hosts
// with the captured PCI functions, NUMA placement, passthrough state, ATS
// option and its type, maintenance, versions, datastores and port groups),
// which BuildRack builds as usual, so every behaviour the twin models applies
// to the captured hosts. What a description cannot say travels in the
// description's "replay" block, and ApplyReplay sets it after the build:
//   - vCenter's AboutInfo as captured (ServiceContent.about);
//   - per host: hardware.systemInfo, biosInfo, cpuInfo, memorySize and
//     summary.hardware; hardware.numaInfo node by node; config.product; the
//     ATS option's value as captured (a string "TRUE" stays a string);
//     runtime connection and power state, bootTime; summary.rebootRequired;
//     the passthrough systemId QueryConfigTarget reports (ESXi's system UUID,
//     which fixed VirtualPCIPassthroughDeviceBackingInfo.systemId must match);
//   - the cluster's DRS/HA switches and DRS rules (ClusterConfigInfoEx), served
//     as data: the twin migrates nothing (README.md, "Not modelled");
//   - datastores' summary.type (a vSAN datastore is a local one underneath);
//   - every VM and template with its devices (disks, NICs, PCI passthrough
//     with fixed, dynamic or vGPU backings), extraConfig exactly as captured,
//     memory reservation, firmware, hardware version, managedBy (vCLS agents,
//     which agents.go's EAM rules then keep running), instance UUID and power state.
// A captured power state is set, not reached through PowerOnVM_Task: the
// capture says what vCenter holds, and the power-on rules (poweron.go) judge
// only what happens next.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
)

type replayDoc struct {
	Replay *Replay `json:"replay"`
}

// Replay is the part of a capture a description cannot carry (rackcert/core/capture/model.py).
type Replay struct {
	About struct {
		Name          string `json:"name"`
		FullName      string `json:"full_name"`
		Vendor        string `json:"vendor"`
		Version       string `json:"version"`
		Build         string `json:"build"`
		APIType       string `json:"api_type"`
		APIVersion    string `json:"api_version"`
		OsType        string `json:"os_type"`
		ProductLineID string `json:"product_line_id"`
	} `json:"about"`
	Clusters []struct {
		Name       string `json:"name"`
		DrsEnabled bool   `json:"drs_enabled"`
		HaEnabled  bool   `json:"ha_enabled"`
		Rules      []struct {
			Name    string `json:"name"`
			Type    string `json:"type"`
			Enabled bool   `json:"enabled"`
		} `json:"rules"`
	} `json:"clusters"`
	Datastores []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"datastores"`
	Hosts []ReplayHost `json:"hosts"`
	VMs   []ReplayVM   `json:"vms"`
}

// ReplayHost is a captured host's identity and state.
type ReplayHost struct {
	Name     string `json:"name"`
	Hardware struct {
		Vendor          string     `json:"vendor"`
		Model           string     `json:"model"`
		UUID            string     `json:"uuid"`
		BiosVersion     string     `json:"bios_version"`
		BiosReleaseDate *time.Time `json:"bios_release_date"`
		CPUModel        string     `json:"cpu_model"`
		CPUPackages     int16      `json:"cpu_packages"`
		CPUCores        int16      `json:"cpu_cores"`
		CPUThreads      int16      `json:"cpu_threads"`
		CPUHz           int64      `json:"cpu_hz"`
		MemoryBytes     int64      `json:"memory_bytes"`
	} `json:"hardware"`
	Numa struct {
		Type  string `json:"type"`
		Nodes []struct {
			ID           int      `json:"id"`
			MemoryBegin  int64    `json:"memory_begin"`
			MemoryLength int64    `json:"memory_length"`
			PCI          []string `json:"pci"`
		} `json:"nodes"`
	} `json:"numa"`
	PassthroughSystemID string `json:"passthrough_system_id"`
	Options             []struct {
		Key   string      `json:"key"`
		Value interface{} `json:"value"`
		Type  string      `json:"type"`
	} `json:"options"`
	Product struct {
		Name       string `json:"name"`
		FullName   string `json:"full_name"`
		Version    string `json:"version"`
		Build      string `json:"build"`
		APIVersion string `json:"api_version"`
	} `json:"product"`
	ConnectionState string     `json:"connection_state"`
	PowerState      string     `json:"power_state"`
	RebootRequired  bool       `json:"reboot_required"`
	BootTime        *time.Time `json:"boot_time"`
}

// ReplayVM is a captured VM or template.
type ReplayVM struct {
	Name      string `json:"name"`
	Host      string `json:"host"`
	Template  bool   `json:"template"`
	ManagedBy *struct {
		ExtensionKey string `json:"extension_key"`
		Type         string `json:"type"`
	} `json:"managed_by"`
	// InstanceUUID is config.instanceUuid (vSphere API reference, VirtualMachineConfigInfo:
	// "VirtualCenter-specific 128-bit UUID of a virtual machine"), which SearchIndex.FindByUuid
	// finds with instanceUuid true; empty: the twin makes one, as vCenter does.
	InstanceUUID      string `json:"instance_uuid"`
	PowerState        string `json:"power_state"`
	GuestID           string `json:"guest_id"`
	HardwareVersion   string `json:"hardware_version"`
	Firmware          string `json:"firmware"`
	CPUs              int32  `json:"num_cpus"`
	MemoryMB          int64  `json:"memory_mb"`
	ReservationLocked bool   `json:"memory_reservation_locked"`
	ReservationMB     int64  `json:"memory_reservation_mb"`
	ExtraConfig       []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"extra_config"`
	Devices []ReplayDevice `json:"devices"`
	// DeviceGroups are the vendor device groups the VM held (config.deviceGroups, vSphere 8).
	DeviceGroups []struct {
		Key  int32  `json:"key"`
		Name string `json:"name"`
	} `json:"device_groups"`
}

// ReplayDevice is one captured disk, NIC or PCI passthrough device.
type ReplayDevice struct {
	Kind       string `json:"kind"`
	Label      string `json:"label"`
	CapacityKB int64  `json:"capacity_kb"`
	Datastore  string `json:"datastore"`
	Adapter    string `json:"adapter"`
	Network    string `json:"network"`
	Backing    string `json:"backing"`
	ID         string `json:"id"`
	DeviceID   string `json:"device_id"`
	VendorID   int    `json:"vendor_id"`
	SystemID   string `json:"system_id"`
	Vgpu       string `json:"vgpu"`
	Allowed    []struct {
		VendorID int `json:"vendor_id"`
		DeviceID int `json:"device_id"`
	} `json:"allowed"`
	// GroupKey and GroupSequence are the device's deviceGroupInfo, when it is a group member.
	GroupKey      *int32 `json:"group_key"`
	GroupSequence *int32 `json:"group_sequence"`
}

// capturedSystemIDs overrides passthruSystemID per host name (poweron.go).
var capturedSystemIDs = map[string]string{}

// ApplyReplay sets what the description's replay block holds; none: nothing to do.
func ApplyReplay(ctx context.Context, rack *Rack, raw []byte) error {
	var doc replayDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	r := doc.Replay
	if r == nil {
		return nil
	}
	replayAbout(r)
	for i := range r.Hosts {
		hs, ok := rack.Hosts[r.Hosts[i].Name]
		if !ok {
			return fmt.Errorf("replay: no host %s in the description", r.Hosts[i].Name)
		}
		replayHost(hs, &r.Hosts[i])
	}
	replayClusters(r)
	for _, d := range r.Datastores {
		if ds := findDatastore(d.Name); ds != nil && d.Type != "" {
			simulator.Map.WithLock(ds, func() { ds.Summary.Type = d.Type })
		}
	}
	c, err := vim25.NewClient(ctx, rack.Model.Service)
	if err != nil {
		return err
	}
	finder, err := datacenterFolders(ctx, c)
	if err != nil {
		return err
	}
	for _, vd := range r.VMs {
		if err := replayVM(ctx, c, finder, rack, vd); err != nil {
			return fmt.Errorf("replay: VM %s: %v", vd.Name, err)
		}
	}
	return nil
}

func replayAbout(r *Replay) {
	si := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
	a := &si.Content.About
	a.Name, a.FullName, a.Vendor = r.About.Name, r.About.FullName, r.About.Vendor
	a.Version, a.Build, a.ApiType = r.About.Version, r.About.Build, r.About.APIType
	a.ApiVersion, a.OsType, a.ProductLineId = r.About.APIVersion, r.About.OsType, r.About.ProductLineID
}

func replayHost(hs *simulator.HostSystem, h *ReplayHost) {
	if h.PassthroughSystemID != "" {
		capturedSystemIDs[hs.Name] = h.PassthroughSystemID
	}
	simulator.Map.WithLock(hs, func() {
		hw := *hs.Hardware
		hw.SystemInfo.Vendor, hw.SystemInfo.Model = h.Hardware.Vendor, h.Hardware.Model
		hw.SystemInfo.Uuid = h.Hardware.UUID
		bios := types.HostBIOSInfo{BiosVersion: h.Hardware.BiosVersion, ReleaseDate: h.Hardware.BiosReleaseDate}
		if hw.BiosInfo != nil {
			bios.DynamicData = hw.BiosInfo.DynamicData
		}
		hw.BiosInfo = &bios
		hw.CpuInfo = types.HostCpuInfo{NumCpuPackages: h.Hardware.CPUPackages,
			NumCpuCores: h.Hardware.CPUCores, NumCpuThreads: h.Hardware.CPUThreads, Hz: h.Hardware.CPUHz}
		hw.MemorySize = h.Hardware.MemoryBytes
		numa := &types.HostNumaInfo{Type: h.Numa.Type, NumNodes: int32(len(h.Numa.Nodes))}
		for _, n := range h.Numa.Nodes {
			numa.NumaNode = append(numa.NumaNode, types.HostNumaNode{TypeId: byte(n.ID),
				MemoryRangeBegin: n.MemoryBegin, MemoryRangeLength: n.MemoryLength, PciId: n.PCI})
		}
		hw.NumaInfo = numa
		hs.Hardware = &hw

		summary := *hs.Summary.Hardware
		summary.Vendor, summary.Model, summary.Uuid = h.Hardware.Vendor, h.Hardware.Model, h.Hardware.UUID
		summary.CpuModel, summary.MemorySize = h.Hardware.CPUModel, h.Hardware.MemoryBytes
		summary.NumCpuPkgs, summary.NumCpuCores = h.Hardware.CPUPackages, h.Hardware.CPUCores
		summary.NumCpuThreads, summary.CpuMhz = h.Hardware.CPUThreads, int32(h.Hardware.CPUHz/1000000)
		hs.Summary.Hardware = &summary

		product := hs.Config.Product
		product.Name, product.FullName = h.Product.Name, h.Product.FullName
		product.Version, product.Build, product.ApiVersion = h.Product.Version, h.Product.Build, h.Product.APIVersion
		hs.Config.Product = product
		hs.Summary.Config.Product = &product

		if h.ConnectionState != "" {
			hs.Runtime.ConnectionState = types.HostSystemConnectionState(h.ConnectionState)
		}
		if h.PowerState != "" {
			hs.Runtime.PowerState = types.HostSystemPowerState(h.PowerState)
		}
		if h.BootTime != nil {
			t := *h.BootTime
			hs.Runtime.BootTime = &t
		}
		hs.Summary.RebootRequired = h.RebootRequired
	})
	if ref := hs.ConfigManager.AdvancedOption; ref != nil {
		if om, ok := simulator.Map.Get(*ref).(*HostOptions); ok {
			for _, o := range h.Options {
				if have := om.find(o.Key); have != nil {
					have.Value = optionValue(o.Type, o.Value)
				}
			}
			if !h.RebootRequired {
				bootATS(hs, om) // esxcli.go: with no reboot pending it runs what it has configured
			}
		}
	}
}

// optionValue is a captured value in the Go type its declared OptionDef type travels as.
func optionValue(kind string, value interface{}) interface{} {
	switch v := value.(type) {
	case float64:
		if kind == "int" {
			return int32(v)
		}
		return int64(v)
	default:
		return v
	}
}

func replayClusters(r *Replay) {
	if len(r.Clusters) == 0 {
		return
	}
	want := r.Clusters[0]
	for _, obj := range simulator.Map.All("ClusterComputeResource") {
		cl, ok := obj.(*simulator.ClusterComputeResource)
		if !ok || cl.Name != want.Name {
			continue
		}
		simulator.Map.WithLock(cl, func() {
			cfg, ok := cl.ConfigurationEx.(*types.ClusterConfigInfoEx)
			if !ok {
				return
			}
			drs, das := want.DrsEnabled, want.HaEnabled
			cfg.DrsConfig.Enabled = &drs
			cfg.DasConfig.Enabled = &das
			cfg.Rule = nil
			for i, rule := range want.Rules {
				enabled := rule.Enabled
				info := types.ClusterRuleInfo{Key: int32(i + 1), Name: rule.Name, Enabled: &enabled}
				cfg.Rule = append(cfg.Rule, clusterRule(rule.Type, info))
			}
		})
	}
}

// clusterRule is a DRS rule of the captured type; its VMs and hosts are not captured.
func clusterRule(kind string, info types.ClusterRuleInfo) types.BaseClusterRuleInfo {
	switch kind {
	case "ClusterAntiAffinityRuleSpec":
		return &types.ClusterAntiAffinityRuleSpec{ClusterRuleInfo: info}
	case "ClusterVmHostRuleInfo":
		return &types.ClusterVmHostRuleInfo{ClusterRuleInfo: info}
	case "ClusterDependencyRuleInfo":
		return &types.ClusterDependencyRuleInfo{ClusterRuleInfo: info}
	default:
		return &types.ClusterAffinityRuleSpec{ClusterRuleInfo: info}
	}
}

type replayFolders struct {
	folders *object.DatacenterFolders
	pool    *object.ResourcePool
}

func datacenterFolders(ctx context.Context, c *vim25.Client) (*replayFolders, error) {
	var dc *object.Datacenter
	for _, obj := range simulator.Map.All("Datacenter") {
		dc = object.NewDatacenter(c, obj.Reference())
	}
	if dc == nil {
		return nil, fmt.Errorf("no datacenter")
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, err
	}
	var pool *object.ResourcePool
	for _, obj := range simulator.Map.All("ClusterComputeResource") {
		cl := obj.(*simulator.ClusterComputeResource)
		pool = object.NewResourcePool(c, *cl.ResourcePool)
		break
	}
	if pool == nil {
		return nil, fmt.Errorf("no cluster")
	}
	return &replayFolders{folders: folders, pool: pool}, nil
}

func replayVM(ctx context.Context, c *vim25.Client, f *replayFolders, rack *Rack, vd ReplayVM) error {
	hs, ok := rack.Hosts[vd.Host]
	if !ok {
		return fmt.Errorf("no host %s", vd.Host)
	}
	home := "LocalDS_0"
	for _, d := range vd.Devices {
		if d.Kind == "disk" && d.Datastore != "" {
			home = d.Datastore
			break
		}
	}
	changes, err := replayDevices(vd.Devices)
	if err != nil {
		return err
	}
	locked := vd.ReservationLocked
	reservation := vd.ReservationMB
	spec := types.VirtualMachineConfigSpec{
		Name:                         vd.Name,
		GuestId:                      vd.GuestID,
		Version:                      vd.HardwareVersion,
		Firmware:                     vd.Firmware,
		NumCPUs:                      vd.CPUs,
		MemoryMB:                     vd.MemoryMB,
		MemoryReservationLockedToMax: &locked,
		MemoryAllocation:             &types.ResourceAllocationInfo{Reservation: &reservation},
		Files:                        &types.VirtualMachineFileInfo{VmPathName: "[" + home + "]"},
		DeviceChange:                 changes,
		InstanceUuid:                 vd.InstanceUUID,
	}
	if vd.ManagedBy != nil {
		spec.ManagedBy = &types.ManagedByInfo{ExtensionKey: vd.ManagedBy.ExtensionKey, Type: vd.ManagedBy.Type}
	}
	task, err := f.folders.VmFolder.CreateVM(ctx, spec, f.pool, object.NewHostSystem(c, hs.Reference()))
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	ref := info.Result.(types.ManagedObjectReference)
	vm := simulator.Map.Get(ref).(*simulator.VirtualMachine)
	simulator.Map.WithLock(vm, func() {
		var extra []types.BaseOptionValue
		for _, e := range vd.ExtraConfig {
			extra = append(extra, &types.OptionValue{Key: e.Key, Value: e.Value})
		}
		vm.Config.ExtraConfig = extra
	})
	replayHeldGroups(vm, vd) // devicegroup_config.go keeps them: read back and judged as made
	if vd.Template {
		return object.NewVirtualMachine(c, ref).MarkAsTemplate(ctx)
	}
	if vd.PowerState != "" {
		setPower(vm, types.VirtualMachinePowerState(vd.PowerState))
	}
	return nil
}

// replayDevices is the device list of a captured VM: one pvscsi controller for its disks.
func replayDevices(devices []ReplayDevice) ([]types.BaseVirtualDeviceConfigSpec, error) {
	var list object.VirtualDeviceList
	var scsi types.BaseVirtualDevice
	key := int32(-100)
	for _, d := range devices {
		key--
		info := &types.Description{Label: d.Label, Summary: d.Label}
		switch d.Kind {
		case "disk":
			ds := findDatastore(d.Datastore)
			if ds == nil {
				return nil, fmt.Errorf("no datastore %s", d.Datastore)
			}
			if scsi == nil {
				var err error
				if scsi, err = list.CreateSCSIController("pvscsi"); err != nil {
					return nil, err
				}
				list = append(list, scsi)
			}
			disk := list.CreateDisk(scsi.(types.BaseVirtualController), ds.Reference(), "")
			disk.CapacityInKB = d.CapacityKB
			disk.DeviceInfo = info
			list = append(list, disk)
		case "nic":
			netRef := findNetwork(d.Network)
			if netRef == nil {
				return nil, fmt.Errorf("no port group %s", d.Network)
			}
			nic, err := list.CreateEthernetCard(orDefault(d.Adapter, "vmxnet3"), &types.VirtualEthernetCardNetworkBackingInfo{
				VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: d.Network},
				Network:                        netRef,
			})
			if err != nil {
				return nil, err
			}
			nic.GetVirtualDevice().DeviceInfo = info
			list = append(list, nic)
		case "pci_passthrough":
			dev := &types.VirtualPCIPassthrough{VirtualDevice: types.VirtualDevice{Key: key, DeviceInfo: info}}
			switch d.Backing {
			case "vgpu":
				dev.Backing = &types.VirtualPCIPassthroughVmiopBackingInfo{Vgpu: d.Vgpu}
			case "dynamic":
				b := &types.VirtualPCIPassthroughDynamicBackingInfo{}
				for _, a := range d.Allowed {
					b.AllowedDevice = append(b.AllowedDevice, types.VirtualPCIPassthroughAllowedDevice{
						VendorId: int32(a.VendorID), DeviceId: int32(a.DeviceID)})
				}
				dev.Backing = b
			default:
				dev.Backing = &types.VirtualPCIPassthroughDeviceBackingInfo{Id: d.ID, DeviceId: d.DeviceID,
					SystemId: d.SystemID, VendorId: int16(uint16(d.VendorID))}
			}
			list = append(list, dev)
		default:
			return nil, fmt.Errorf("device kind %q", strings.TrimSpace(d.Kind))
		}
	}
	changes, err := list.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return nil, err
	}
	for _, change := range changes {
		if _, isDisk := change.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); isDisk {
			change.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	return changes, nil
}

// replayHeldGroups gives a replayed VM the device groups it held: its passthrough devices
// were created in the captured order, so the n-th one is the n-th captured passthrough
// device, with its captured groupInstanceKey and sequenceId.
func replayHeldGroups(vm *simulator.VirtualMachine, vd ReplayVM) {
	if len(vd.DeviceGroups) == 0 {
		return
	}
	var captured []ReplayDevice
	for _, d := range vd.Devices {
		if d.Kind == "pci_passthrough" {
			captured = append(captured, d)
		}
	}
	members := map[int32]map[int32]int32{} // group key -> sequence -> device key
	i := 0
	for _, dev := range vm.Config.Hardware.Device {
		pt, ok := dev.(*types.VirtualPCIPassthrough)
		if !ok || i >= len(captured) {
			continue
		}
		d := captured[i]
		i++
		if d.GroupKey == nil || d.GroupSequence == nil {
			continue
		}
		if members[*d.GroupKey] == nil {
			members[*d.GroupKey] = map[int32]int32{}
		}
		members[*d.GroupKey][*d.GroupSequence] = pt.Key
	}
	var held []heldGroup
	for _, g := range vd.DeviceGroups {
		h := heldGroup{Name: g.Name, Key: g.Key}
		for seq := int32(0); seq < int32(len(members[g.Key])); seq++ {
			if key, ok := members[g.Key][seq]; ok {
				h.Members = append(h.Members, key)
			}
		}
		held = append(held, h)
	}
	vmGroups.Store(vm.Self.Value, held)
}
