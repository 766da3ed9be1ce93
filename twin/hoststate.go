package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// A host in maintenance mode runs no new VM. vSphere Resource Management,
// "Using Maintenance Mode": "While in maintenance mode, the host does not allow
// you to deploy or power on a virtual machine." The vSphere API reference lists
// InvalidState among the faults of VirtualMachine.PowerOnVM_Task,
// VirtualMachine.CloneVM_Task, Folder.CreateVM_Task and RelocateVM_Task;
// InvalidHostState is its subtype naming the host ("The host has an invalid
// state"), and it is what vCenter answers a clone or deploy onto a host in
// maintenance mode with: "The operation is not allowed in the current state of
// the host." (pyVmomi CloneVM_Task, vim.fault.InvalidHostState with `host`;
// community.vmware's vmware_guest deploying onto such a host gets the same
// message). vCLS agents are powered off there and not started again until the
// host exits (agents.go), so they never ask.

// hostStateMessage is vCenter's InvalidHostState message, with what was asked.
func hostStateMessage(hs *simulator.HostSystem, what string) string {
	return fmt.Sprintf("The operation is not allowed in the current state of the host: %s is in"+
		" maintenance mode (%s)", hs.Name, what)
}

// placementRefusal: a VM deployed (CreateVM_Task, CloneVM_Task) or moved
// (RelocateVM_Task, MigrateVM_Task) onto a host in maintenance mode.
func placementRefusal(host *types.ManagedObjectReference, what string) (types.BaseMethodFault, string) {
	if host == nil {
		return nil, ""
	}
	hs, ok := simulator.Map.Get(*host).(*simulator.HostSystem)
	if !ok || !hs.Runtime.InMaintenanceMode {
		return nil, ""
	}
	ref := hs.Self
	return &types.InvalidHostState{Host: &ref}, hostStateMessage(hs, what)
}

// maintenanceRefusal: a powered-off VM on a host in maintenance mode does not power on.
func maintenanceRefusal(vm *simulator.VirtualMachine) (types.BaseMethodFault, string) {
	if vm.Runtime.Host == nil || vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
		return nil, ""
	}
	return placementRefusal(vm.Runtime.Host, "powering on "+vm.Name)
}
