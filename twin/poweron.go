package main

import (
	"context"
	"crypto/sha1"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// What ESXi checks when a VM with passthrough devices powers on (vSphere
// "Add a PCI Device to a Virtual Machine" and the DirectPath I/O requirements
// in the vSphere Resource Management / VM Administration guides):
//   - a fixed (DirectPath I/O) backing must name a device that is active for
//     passthrough on the VM's host (HostPciPassthruInfo.passthruActive), with
//     the host's passthrough systemId (the value QueryConfigTarget reports in
//     VirtualMachinePciPassthroughInfo.systemId; it is ESXi's system UUID, not
//     the BIOS UUID in hardware.systemInfo.uuid);
//   - one passthrough device belongs to one powered-on VM at a time;
//   - a VM with passthrough devices must reserve all its memory, else ESXi
//     says "Invalid memory setting: memory reservation (sched.mem.min) should
//     be equal to memsize".
// The refusal is a task error whose fault is GenericVmConfigFault, with the
// "Module 'DevicePowerOn' power on failed" wording ESXi uses.

// passthruSystemID is the host's ESXi system UUID, deliberately not its BIOS UUID.
func passthruSystemID(hs *simulator.HostSystem) string {
	if id, ok := capturedSystemIDs[hs.Name]; ok { // a replayed capture's (capture.go)
		return id
	}
	sum := sha1.Sum([]byte("esx-system-uuid/" + hs.Name))
	return fmt.Sprintf("%x-%x-%x-%x", sum[0:4], sum[4:8], sum[8:10], sum[10:16])
}

// passthroughDevices are the VM's VirtualPCIPassthrough devices, whatever their backing.
func passthroughDevices(vm *simulator.VirtualMachine) []*types.VirtualPCIPassthrough {
	if vm.Config == nil {
		return nil
	}
	var out []*types.VirtualPCIPassthrough
	for _, dev := range vm.Config.Hardware.Device {
		if pt, ok := dev.(*types.VirtualPCIPassthrough); ok {
			out = append(out, pt)
		}
	}
	return out
}

// fixedBackings are the DirectPath I/O (fixed device) backings among them.
func fixedBackings(vm *simulator.VirtualMachine) []*types.VirtualPCIPassthroughDeviceBackingInfo {
	var out []*types.VirtualPCIPassthroughDeviceBackingInfo
	for _, pt := range passthroughDevices(vm) {
		if b, ok := pt.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
			out = append(out, b)
		}
	}
	return out
}

// powerOnFault is every check a power-on passes, on every path (PowerOnVM_Task,
// PowerOnMultiVM_Task, CloneVM_Task with powerOn): the host is not in
// maintenance mode (hoststate.go), the host has the vCPUs, and the devices are
// ESXi's to give (GenericVmConfigFault). nil when the VM may start.
func powerOnFault(vm *simulator.VirtualMachine) (types.BaseMethodFault, string) {
	if f, msg := maintenanceRefusal(vm); f != nil {
		return f, msg
	}
	if f, msg := cpuRefusal(vm); f != nil {
		return f, msg
	}
	if msg := powerOnRefusal(vm); msg != "" {
		return &types.GenericVmConfigFault{Reason: msg}, msg
	}
	return nil, ""
}

// powerOnRefusal is ESXi's answer to PowerOnVM_Task, or "" when the VM may start.
func powerOnRefusal(vm *simulator.VirtualMachine) string {
	if vm.Runtime.Host == nil || vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
		return ""
	}
	hs, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok {
		return ""
	}
	prefix := fmt.Sprintf("Failed to start the virtual machine %s. Module 'DevicePowerOn' power on failed:", vm.Name)
	active := map[string]bool{}
	for _, info := range hs.Config.PciPassthruInfo {
		i := info.GetHostPciPassthruInfo()
		active[i.Id] = i.PassthruActive
	}
	for _, b := range fixedBackings(vm) {
		if !active[b.Id] {
			return fmt.Sprintf("%s device %s is not available for passthrough on host %s", prefix, b.Id, hs.Name)
		}
		if b.SystemId != passthruSystemID(hs) {
			return fmt.Sprintf("%s device %s: systemId %q is not host %s's", prefix, b.Id, b.SystemId, hs.Name)
		}
		for _, other := range vmsOn(hs) {
			if other == vm || other.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				continue
			}
			for _, ob := range fixedBackings(other) {
				if ob.Id == b.Id {
					return fmt.Sprintf("%s device %s is already in use by virtual machine %s", prefix, b.Id, other.Name)
				}
			}
		}
	}
	if msg := deviceGroupRefusal(vm, hs, prefix); msg != "" { // devicegroup_config.go
		return msg
	}
	if msg := vgpuRefusal(vm, hs, prefix); msg != "" {
		return msg
	}
	if len(passthroughDevices(vm)) > 0 {
		locked := vm.Config.MemoryReservationLockedToMax != nil && *vm.Config.MemoryReservationLockedToMax
		reserved := int64(0)
		if vm.Config.MemoryAllocation != nil && vm.Config.MemoryAllocation.Reservation != nil {
			reserved = *vm.Config.MemoryAllocation.Reservation
		}
		if !locked && reserved < int64(vm.Config.Hardware.MemoryMB) {
			return fmt.Sprintf("Invalid memory setting: memory reservation (sched.mem.min) should be equal"+
				" to memsize(%d).", vm.Config.Hardware.MemoryMB)
		}
	}
	return ""
}

// DirectPath I/O rules on the other paths (vSphere Virtual Machine
// Administration, "PCI Devices" / "Other Virtual Machine Device
// Configuration": a VM with a DirectPath I/O device does not support
// snapshots, suspend and resume, vMotion or hot add/remove; vSphere Resource
// Management: a passthrough device belongs to one powered-on VM). Each answer
// is the fault vCenter's checks give for it.

// cpuRefusal: ESXi powers on no VM with more virtual CPUs than the host has
// logical processors (NotEnoughCpus: "the host hardware does not have enough
// CPU cores to support the number of virtual CPUs in the virtual machine").
func cpuRefusal(vm *simulator.VirtualMachine) (types.BaseMethodFault, string) {
	if vm.Runtime.Host == nil || vm.Config == nil {
		return nil, ""
	}
	hs, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok || hs.Hardware == nil {
		return nil, ""
	}
	threads := int32(hs.Hardware.CpuInfo.NumCpuThreads)
	if threads > 0 && vm.Config.Hardware.NumCPU > threads {
		return &types.NotEnoughCpus{NumCpuDest: threads, NumCpuVm: vm.Config.Hardware.NumCPU},
			fmt.Sprintf("The number of virtual CPUs (%d) of %s exceeds the %d logical processors of host %s",
				vm.Config.Hardware.NumCPU, vm.Name, threads, hs.Name)
	}
	return nil, ""
}

// firstPassthrough is the label of the VM's first DirectPath I/O device, or "".
func firstPassthrough(vm *simulator.VirtualMachine) string {
	for _, pt := range passthroughDevices(vm) {
		if pt.DeviceInfo != nil && pt.DeviceInfo.GetDescription().Label != "" {
			return pt.DeviceInfo.GetDescription().Label
		}
		return "PCI device"
	}
	return ""
}

// migrateRefusal: vMotion of a powered-on VM with a passthrough device
// (DisallowedMigrationDeviceAttached). A powered-off VM may be moved (cold
// migration); its fixed backings then name the old host, which power-on refuses.
func migrateRefusal(vm *simulator.VirtualMachine, target *types.ManagedObjectReference) (types.BaseMethodFault, string) {
	device := firstPassthrough(vm)
	if device == "" || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return nil, ""
	}
	if target != nil && vm.Runtime.Host != nil && *target == *vm.Runtime.Host {
		return nil, "" // no host change: not a vMotion
	}
	msg := fmt.Sprintf("Virtual machine %s is configured to use a device that prevents the operation:"+
		" Device '%s' is a PCI passthrough device, which is not supported with vMotion", vm.Name, device)
	return &types.DisallowedMigrationDeviceAttached{Fault: types.LocalizedMethodFault{
		Fault: &types.DeviceNotSupported{Device: device}, LocalizedMessage: msg}}, msg
}

// moveRefusal: a relocation or migration is refused onto a host in maintenance
// mode (hoststate.go), and a running passthrough VM is not moved at all.
func moveRefusal(vm *simulator.VirtualMachine, target *types.ManagedObjectReference) (types.BaseMethodFault, string) {
	if target != nil && (vm.Runtime.Host == nil || *target != *vm.Runtime.Host) {
		if f, msg := placementRefusal(target, "moving "+vm.Name); f != nil {
			return f, msg
		}
	}
	return migrateRefusal(vm, target)
}

// snapshotRefusal: no snapshot of a VM with a passthrough device (SnapshotIncompatibleDeviceInVm).
func snapshotRefusal(vm *simulator.VirtualMachine) (types.BaseMethodFault, string) {
	device := firstPassthrough(vm)
	if device == "" {
		return nil, ""
	}
	msg := fmt.Sprintf("Virtual machine %s is configured to use a device that prevents the snapshot operation:"+
		" Device '%s' is a PCI passthrough device", vm.Name, device)
	return &types.SnapshotIncompatibleDeviceInVm{Fault: types.LocalizedMethodFault{
		Fault: &types.DeviceNotSupported{Device: device}, LocalizedMessage: msg}}, msg
}

// suspendRefusal: no suspend of a VM with a passthrough device (DeviceNotSupported).
func suspendRefusal(vm *simulator.VirtualMachine) (types.BaseMethodFault, string) {
	device := firstPassthrough(vm)
	if device == "" {
		return nil, ""
	}
	msg := fmt.Sprintf("Virtual machine %s cannot be suspended: Device '%s' is a PCI passthrough device", vm.Name, device)
	return &types.DeviceNotSupported{Device: device, Reason: "vm"}, msg
}

// memoryRefusal: ESXi cannot hot-remove memory, so a running VM's memory does
// not shrink (vSphere Virtual Machine Administration, "Memory Hot Add": memory
// can be added, not removed, while the VM runs); NotSupported.
func memoryRefusal(vm *simulator.VirtualMachine, spec *types.VirtualMachineConfigSpec) (types.BaseMethodFault, string) {
	if spec.MemoryMB == 0 || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || vm.Config == nil {
		return nil, ""
	}
	if spec.MemoryMB < int64(vm.Config.Hardware.MemoryMB) {
		return &types.NotSupported{}, fmt.Sprintf("VM %s is powered on: its memory cannot shrink from %d MB to %d MB"+
			" (memory hot-remove is not supported)", vm.Name, vm.Config.Hardware.MemoryMB, spec.MemoryMB)
	}
	return nil, ""
}

// powerOnMultiTask is Datacenter.PowerOnMultiVM_Task on a cluster without DRS:
// each VM is powered on in turn, by its own task (ClusterAttemptedVmInfo), or
// not attempted with the fault its power-on would raise (ClusterNotAttemptedVmInfo),
// so a second holder of a running VM's device stays off.
func powerOnMultiTask(dc mo.Reference, vms []types.ManagedObjectReference) types.ManagedObjectReference {
	task := simulator.CreateTask(dc, "powerOnMultiVM", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		result := &types.ClusterPowerOnVmResult{}
		for _, ref := range vms {
			vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine)
			if !ok {
				return nil, &types.ManagedObjectNotFound{Obj: ref}
			}
			var fault types.BaseMethodFault
			msg := ""
			simulator.Map.WithLock(vm, func() { fault, msg = powerOnFault(vm) })
			if fault != nil {
				result.NotAttempted = append(result.NotAttempted, types.ClusterNotAttemptedVmInfo{
					Vm: ref, Fault: types.LocalizedMethodFault{Fault: fault, LocalizedMessage: msg}})
				continue
			}
			t, err := object.NewVirtualMachine(site, ref).PowerOn(context.Background())
			if err != nil {
				return nil, asFault(err)
			}
			_ = t.Wait(context.Background())
			tref := t.Reference()
			result.Attempted = append(result.Attempted, types.ClusterAttemptedVmInfo{Vm: ref, Task: &tref})
		}
		return result, nil
	})
	return task.Run()
}
