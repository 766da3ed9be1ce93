package main

import (
	"context"
	"crypto/sha1"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
)

// vSphere Cluster Services (vSphere 7.0 U1+ docs, "vSphere Cluster Services"):
// vCenter runs one agent VM per host up to three per cluster, deployed and
// kept running by the ESX Agent Manager. They are marked as such in
// config.managedBy (ManagedByInfo, extensionKey com.vmware.vim.eam, type
// cluster-agent); from 7.0 U3 they are named vCLS-<UUID> and live in a vCLS
// folder. If one is powered off, EAM powers it on again; a host entering
// maintenance mode does not wait for them (vCenter moves them off or powers
// them off), and they come back when it exits.
const (
	eamExtension   = "com.vmware.vim.eam"
	agentType      = "cluster-agent"
	agentsPerHosts = 3
)

// agentRestart is how long EAM takes to power a stopped agent VM on again.
var agentRestart = 500 * time.Millisecond

func isAgent(vm *simulator.VirtualMachine) bool {
	return vm.Config != nil && vm.Config.ManagedBy != nil && vm.Config.ManagedBy.ExtensionKey == eamExtension
}

func agentName(cluster string, i int) string {
	sum := sha1.Sum([]byte(fmt.Sprintf("%s/%d", cluster, i)))
	return fmt.Sprintf("vCLS-%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

// createAgents deploys the cluster's vCLS VMs, powered on, one per host.
func createAgents(ctx context.Context, c *vim25.Client, folders *object.DatacenterFolders,
	pool *object.ResourcePool, cluster string, hosts []*simulator.HostSystem, count int) error {
	if count < 0 {
		count = len(hosts)
		if count > agentsPerHosts {
			count = agentsPerHosts
		}
	}
	if count == 0 {
		return nil
	}
	// vCenter runs agents on hosts that are not in maintenance mode, when there are any.
	var usable []*simulator.HostSystem
	for _, hs := range hosts {
		if !hs.Runtime.InMaintenanceMode {
			usable = append(usable, hs)
		}
	}
	folder, err := folders.VmFolder.CreateFolder(ctx, "vCLS")
	if err != nil {
		return err
	}
	for i := 0; i < count; i++ {
		spec := types.VirtualMachineConfigSpec{
			Name:      agentName(cluster, i),
			GuestId:   "other3xLinux64Guest", // Photon OS
			NumCPUs:   1,
			MemoryMB:  128,
			Files:     &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
			ManagedBy: &types.ManagedByInfo{ExtensionKey: eamExtension, Type: agentType},
		}
		target := hosts[i%len(hosts)]
		if len(usable) > 0 {
			target = usable[i%len(usable)]
		}
		host := object.NewHostSystem(c, target.Reference())
		task, err := folder.CreateVM(ctx, spec, pool, host)
		if err != nil {
			return err
		}
		info, err := task.WaitForResult(ctx, nil)
		if err != nil {
			return err
		}
		if target.Runtime.InMaintenanceMode {
			continue
		}
		vm := object.NewVirtualMachine(c, info.Result.(types.ManagedObjectReference))
		if task, err = vm.PowerOn(ctx); err != nil {
			return err
		}
		if err := task.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

func vmsOn(hs *simulator.HostSystem) []*simulator.VirtualMachine {
	var out []*simulator.VirtualMachine
	for _, ref := range hs.Vm {
		if vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine); ok {
			out = append(out, vm)
		}
	}
	return out
}

func setPower(vm *simulator.VirtualMachine, state types.VirtualMachinePowerState) {
	simulator.Map.WithLock(vm, func() {
		if vm.Runtime.PowerState == state {
			return
		}
		changes := []types.PropertyChange{
			{Name: "runtime.powerState", Val: state},
			{Name: "summary.runtime.powerState", Val: state},
		}
		if state == types.VirtualMachinePowerStatePoweredOn {
			changes = append(changes, types.PropertyChange{Name: "summary.runtime.bootTime", Val: time.Now()})
		}
		simulator.Map.Update(vm, changes)
	})
}

// agentWatch is EAM's loop for one stopped agent VM: power it on again unless
// its host is in maintenance mode.
var agentWatch sync.Map

func restartAgentLater(vm *simulator.VirtualMachine) {
	if _, busy := agentWatch.LoadOrStore(vm.Self.Value, true); busy {
		return
	}
	go func() {
		defer agentWatch.Delete(vm.Self.Value)
		time.Sleep(agentRestart)
		var host *simulator.HostSystem
		simulator.Map.WithLock(vm, func() {
			if vm.Runtime.Host != nil {
				host, _ = simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
			}
		})
		inMaintenance := false
		if host != nil {
			simulator.Map.WithLock(host, func() { inMaintenance = host.Runtime.InMaintenanceMode })
		}
		if !inMaintenance {
			log.Printf("eam: powering agent VM %s on again", vm.Name)
			setPower(vm, types.VirtualMachinePowerStatePoweredOn)
		}
	}()
}
