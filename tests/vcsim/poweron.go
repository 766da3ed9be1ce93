package main

import (
	"crypto/sha1"
	"fmt"

	"github.com/vmware/govmomi/simulator"
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

func fixedBackings(vm *simulator.VirtualMachine) []*types.VirtualPCIPassthroughDeviceBackingInfo {
	var out []*types.VirtualPCIPassthroughDeviceBackingInfo
	if vm.Config == nil {
		return nil
	}
	for _, dev := range vm.Config.Hardware.Device {
		if pt, ok := dev.(*types.VirtualPCIPassthrough); ok {
			if b, ok := pt.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
				out = append(out, b)
			}
		}
	}
	return out
}

func passthroughCount(vm *simulator.VirtualMachine) int {
	n := 0
	if vm.Config == nil {
		return 0
	}
	for _, dev := range vm.Config.Hardware.Device {
		if _, ok := dev.(*types.VirtualPCIPassthrough); ok {
			n++
		}
	}
	return n
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
	if msg := vgpuRefusal(vm, hs, prefix); msg != "" {
		return msg
	}
	if passthroughCount(vm) > 0 {
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
