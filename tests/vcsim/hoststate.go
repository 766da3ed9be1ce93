package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// A host in maintenance mode runs no new VM. vSphere Resource Management,
// "Using Maintenance Mode": "While in maintenance mode, the host does not allow
// you to deploy or power on a virtual machine." The vSphere API reference lists
// InvalidState among VirtualMachine.PowerOnVM_Task's faults; InvalidHostState is
// its subtype naming the host. vCLS agents are powered off there and not started
// again until the host exits (agents.go), so they never ask.
// (Deploying a clone onto such a host is still accepted here: README.md.)

// maintenancePowerOn answers PowerOnVM_Task for a VM on a host in maintenance
// mode with a failed task, or returns nil when the host runs VMs.
func maintenancePowerOn(vm *simulator.VirtualMachine, method string) *types.ManagedObjectReference {
	if vm.Runtime.Host == nil || vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
		return nil
	}
	hs, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok || !hs.Runtime.InMaintenanceMode {
		return nil
	}
	ref := hs.Self
	msg := fmt.Sprintf("The operation is not allowed in the current state of the host: %s is in"+
		" maintenance mode (powering on %s)", hs.Name, vm.Name)
	task := failedTask(vm, method, &types.InvalidHostState{Host: &ref}, msg)
	return &task
}
