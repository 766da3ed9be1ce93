package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// A VM as vCenter 7.0.3 reports it after each task that creates or changes it
// (the simulator leaves these as its own):
//   - VirtualMachine.resourceConfig is set: the VM's ResourceConfigSpec, with
//     the VM as entity and its CPU and memory allocation;
//   - memoryReservationLockedToMax: "memory resource reservation for this
//     virtual machine will always be equal to the virtual machine's memory
//     size" (VirtualMachineConfigInfo), so memoryAllocation.reservation reads
//     the memory size in MB;
//   - no simulator key in extraConfig (the simulator marks its VMs "govcsim");
//   - device keys and labels as ESXi assigns them: SCSI controllers from 1000,
//     disks from 2000 ("Hard disk 1"), NICs from 4000 ("Network adapter 1"),
//     PCI passthrough devices from 13000 ("PCI device 0"), the key ranges of
//     ESXi's virtual device classes (VirtualDevice.key; as govc device.info
//     and vmware_guest_info show them on ESXi 7.0).
//
// vmShape listens to the registry's task updates, as the simulator's
// PropertyCollector does, and reshapes the VM when a task on it succeeds;
// the VM's lock is held by the method that ran the task.
type vmShape struct{}

func (s *vmShape) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "RackcertVMShape", Value: "vm-shape"}
}

func (s *vmShape) PutObject(mo.Reference)                    {}
func (s *vmShape) RemoveObject(types.ManagedObjectReference) {}

func (s *vmShape) UpdateObject(obj mo.Reference, changes []types.PropertyChange) {
	task, ok := obj.(*mo.Task)
	if !ok {
		return
	}
	done := false
	for _, c := range changes {
		if c.Name == "info.state" && c.Val == types.TaskInfoStateSuccess {
			done = true
		}
	}
	if !done {
		return
	}
	var refs []types.ManagedObjectReference
	if task.Info.Entity != nil && task.Info.Entity.Type == "VirtualMachine" {
		refs = append(refs, *task.Info.Entity)
	}
	if r, ok := task.Info.Result.(types.ManagedObjectReference); ok && r.Type == "VirtualMachine" {
		refs = append(refs, r)
	}
	for _, ref := range refs {
		if vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine); ok {
			shapeVM(vm)
		}
	}
}

// device key ranges and label stems per device class (see the type comment).
var deviceClasses = []struct {
	base  int32
	label string
	first int
	match func(types.BaseVirtualDevice) bool
}{
	{1000, "SCSI controller %d", 0, func(d types.BaseVirtualDevice) bool {
		_, ok := d.(types.BaseVirtualSCSIController)
		return ok
	}},
	{2000, "Hard disk %d", 1, func(d types.BaseVirtualDevice) bool { _, ok := d.(*types.VirtualDisk); return ok }},
	{4000, "Network adapter %d", 1, func(d types.BaseVirtualDevice) bool {
		_, ok := d.(types.BaseVirtualEthernetCard)
		return ok
	}},
	{13000, "PCI device %d", 0, func(d types.BaseVirtualDevice) bool {
		_, ok := d.(*types.VirtualPCIPassthrough)
		return ok
	}},
}

func shapeVM(vm *simulator.VirtualMachine) {
	cfg := vm.Config
	if cfg == nil {
		return
	}
	var extra []types.BaseOptionValue
	for _, o := range cfg.ExtraConfig {
		if o.GetOptionValue().Key != "govcsim" {
			extra = append(extra, o)
		}
	}
	cfg.ExtraConfig = extra
	if cfg.MemoryAllocation != nil && cfg.MemoryReservationLockedToMax != nil && *cfg.MemoryReservationLockedToMax {
		mb := int64(cfg.Hardware.MemoryMB)
		cfg.MemoryAllocation.Reservation = &mb
	}
	rekeyDevices(vm)
	rc := &types.ResourceConfigSpec{Entity: &vm.Self}
	if cfg.CpuAllocation != nil {
		rc.CpuAllocation = *cfg.CpuAllocation
	}
	if cfg.MemoryAllocation != nil {
		rc.MemoryAllocation = *cfg.MemoryAllocation
	}
	vm.ResourceConfig = rc
}

// rekeyDevices moves devices outside their class's range into it and labels
// them; references to a moved controller (controllerKey, device lists) follow.
func rekeyDevices(vm *simulator.VirtualMachine) {
	devices := vm.Config.Hardware.Device
	moved := map[int32]int32{}
	for _, class := range deviceClasses {
		used := map[int32]bool{}
		var members []*types.VirtualDevice
		for _, d := range devices {
			if class.match(d) {
				members = append(members, d.GetVirtualDevice())
			}
		}
		for _, d := range members {
			if d.Key >= class.base && d.Key < class.base+1000 {
				used[d.Key] = true
			}
		}
		next := class.base
		for _, d := range members {
			if d.Key < class.base || d.Key >= class.base+1000 {
				for used[next] {
					next++
				}
				moved[d.Key] = next
				d.Key = next
				used[next] = true
			}
			label := fmt.Sprintf(class.label, int(d.Key-class.base)+class.first)
			if d.DeviceInfo == nil {
				d.DeviceInfo = &types.Description{}
			}
			info := d.DeviceInfo.GetDescription()
			info.Label = label
			info.Summary = deviceSummary(d, info.Summary)
		}
	}
	if len(moved) == 0 {
		return
	}
	for _, d := range devices {
		v := d.GetVirtualDevice()
		if k, ok := moved[v.ControllerKey]; ok {
			v.ControllerKey = k
		}
		if c, ok := d.(types.BaseVirtualController); ok {
			ctl := c.GetVirtualController()
			for i, k := range ctl.Device {
				if nk, ok := moved[k]; ok {
					ctl.Device[i] = nk
				}
			}
		}
	}
}

func deviceSummary(d *types.VirtualDevice, old string) string {
	if b, ok := d.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
		return b.Id
	}
	return old
}
