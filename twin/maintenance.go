package main

import (
	"fmt"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// enterMaintenance is HostSystem.EnterMaintenanceMode_Task as vCenter runs it
// (vSphere API reference): the task "does not complete until there are no
// powered-on virtual machines on the host and no provisioning operations in
// progress"; `timeout` seconds (0: no limit) ends it in Timedout. A VM with a
// passthrough device cannot be migrated, and this cluster has no DRS, so a
// powered-on VM blocks until someone powers it off. With
// evacuatePoweredOffVms, on a cluster without DRS the task does not succeed
// while powered-off VMs are still registered on the host. vCLS agent VMs do
// not block: vCenter takes them off the host (the twin powers them off; they
// return at exit).
func enterMaintenance(hs *simulator.HostSystem, req *types.EnterMaintenanceMode_Task) types.ManagedObjectReference {
	task := runningTask(hs, "enterMaintenanceMode")
	evacuate := req.EvacuatePoweredOffVms != nil && *req.EvacuatePoweredOffVms
	started := time.Now()
	go func() {
		time.Sleep(modelled(enterMaintenanceS)) // clock.go
		for {
			var blocking []string
			simulator.Map.WithLock(hs, func() {
				for _, vm := range vmsOn(hs) {
					if isAgent(vm) {
						continue
					}
					on := vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
					if on || evacuate {
						blocking = append(blocking, vm.Name)
					}
				}
			})
			if n := limits.provisioningOn(hs.Self.Value); n > 0 { // limits.go
				blocking = append(blocking, fmt.Sprintf("%d provisioning operation(s)", n))
			}
			if len(blocking) == 0 {
				var agents []*simulator.VirtualMachine
				simulator.Map.WithLock(hs, func() {
					for _, vm := range vmsOn(hs) {
						if isAgent(vm) {
							agents = append(agents, vm)
						}
					}
					hs.Runtime.InMaintenanceMode = true
				})
				for _, vm := range agents {
					setPower(vm, types.VirtualMachinePowerStatePoweredOff)
				}
				finishTask(task, nil, "")
				return
			}
			if req.Timeout > 0 && time.Since(started) > time.Duration(req.Timeout)*time.Second {
				finishTask(task, &types.Timedout{}, fmt.Sprintf("Operation timed out: host %s still has"+
					" VM(s) %v that cannot be moved", hs.Name, blocking))
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return task.Self
}

// exitMaintenance leaves maintenance mode; EAM powers the host's agent VMs on again.
func exitMaintenance(hs *simulator.HostSystem) types.ManagedObjectReference {
	task := runningTask(hs, "exitMaintenanceMode")
	go func() {
		time.Sleep(modelled(exitMaintenanceS)) // clock.go
		leaveMaintenance(hs, task)
	}()
	return task.Self
}

func leaveMaintenance(hs *simulator.HostSystem, task *simulator.Task) {
	var agents []*simulator.VirtualMachine
	simulator.Map.WithLock(hs, func() {
		hs.Runtime.InMaintenanceMode = false
		for _, vm := range vmsOn(hs) {
			if isAgent(vm) {
				agents = append(agents, vm)
			}
		}
	})
	for _, vm := range agents {
		setPower(vm, types.VirtualMachinePowerStatePoweredOn)
	}
	finishTask(task, nil, "")
}

// runningTask is a task in state running, finished later by finishTask.
func runningTask(obj *simulator.HostSystem, name string) *simulator.Task {
	task := simulator.CreateTask(obj, name, nil)
	nameTask(task, obj, name) // clock.go
	simulator.Map.Update(task, []types.PropertyChange{
		{Name: "info.startTime", Val: time.Now()},
		{Name: "info.state", Val: types.TaskInfoStateRunning},
	})
	return task
}

func finishTask(task *simulator.Task, fault types.BaseMethodFault, msg string) {
	changes := []types.PropertyChange{{Name: "info.completeTime", Val: time.Now()}}
	if fault == nil {
		changes = append(changes, types.PropertyChange{Name: "info.state", Val: types.TaskInfoStateSuccess})
	} else {
		changes = append(changes,
			types.PropertyChange{Name: "info.state", Val: types.TaskInfoStateError},
			types.PropertyChange{Name: "info.error", Val: types.LocalizedMethodFault{Fault: fault, LocalizedMessage: msg}})
	}
	simulator.Map.WithLock(task, func() { simulator.Map.Update(task, changes) })
}
