package main

import (
	"net/http"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// toolsUnavailableMsg is vCenter's text for the ToolsUnavailable fault.
const toolsUnavailableMsg = "Cannot complete operation because VMware Tools is not running in this virtual machine."

// answerGuestOps refuses the guest operations that VMware Tools carries out inside the guest
// when no Tools run there. vSphere API reference, VirtualMachine.ShutdownGuest, RebootGuest
// and StandbyGuest: "Faults: ToolsUnavailable - Thrown if VMware Tools is not running."
// (InvalidPowerState for a VM that is not powered on is the simulator's, left to it.)
// govmomi's simulator powers the VM off whether Tools run or not; a client that relied on
// that would find on a real vCenter that a guest without Tools never shuts down. Tools run
// once the guest has spoken on the Tools channel (tools.go).
func answerGuestOps(w http.ResponseWriter, method *simulator.Method) bool {
	switch method.Body.(type) {
	case *types.ShutdownGuest, *types.RebootGuest, *types.StandbyGuest:
	default:
		return false
	}
	vm, ok := simulator.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return false
	}
	running := string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
	if vm.Guest != nil && vm.Guest.ToolsRunningStatus == running {
		return false
	}
	writeSoapFault(w, "ToolsUnavailable", toolsUnavailableMsg)
	return true
}
