package main

// VMware Tools: the only source of a VM's guest information.
//
// vSphere API reference, GuestInfo: "Most of this information is collected by
// VMware Tools"; ipAddress is the "Primary IP address assigned to the guest
// operating system, if known", hostName the guest's, guestState "running" or
// "notRunning", toolsRunningStatus a VirtualMachineToolsRunningStatus
// (guestToolsNotRunning: "VMware Tools is not running"; guestToolsRunning), and
// toolsStatus (deprecated, still read by clients): toolsNotInstalled ("VMware
// Tools has never been installed or has not run in the virtual machine", the
// simulator's value for a new VM), toolsNotRunning once they have run, toolsOk
// while they run; toolsVersion stays what Tools last announced.
// Nothing is known of a guest until its Tools report: a VM that was just powered
// on, or never was, has no ipAddress, toolsRunningStatus guestToolsNotRunning and
// guestState notRunning. What Tools reported is reset when the VM powers off,
// suspends or powers on again (a fresh boot: Tools starts over).
//
// How Tools report: vmtoolsd in the guest talks to the VMX over the backdoor's
// RPCI channel (open-vm-tools, lib/include/guestInfo.h and the guestInfo
// plugin): "tools.set.version <n>" when it starts, then "SetGuestInfo  <type>
// <value>" with INFO_DNS_NAME (1) for the hostname and INFO_IPADDRESS (2) for
// the primary address (the version 1 form; later forms send the NIC list as
// XDR); the VMX answers "1 " for success and "0 <reason>" otherwise, and hostd
// passes the values on to vCenter. The twin has no VMX, so its channel is a
// loopback-only HTTP endpoint on the twin's own listener: POST
// /guestrpc/<BIOS UUID> with one RPCI command as the body, the BIOS UUID
// (config.uuid) being the VM's identity as its guest reads it from SMBIOS. Only
// the lab's guest agent (rackcert/lab/guest_agent.py) speaks it, once a VM's
// SSH host answers. The twin never derives guest information from anything
// else: not from the cloud-init guestinfo keys rackcert writes, not from the
// simulator's own shortcuts (its "SET.guest.*" / "ip0" extraConfig keys, its
// customization at power-on), whose writes are put back at once.

import (
	"fmt"
	"io/ioutil"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// RPCI guest info types (open-vm-tools GuestInfoType).
const (
	infoDNSName   = 1
	infoIPAddress = 2
)

// toolsModel resets a VM's guest information when its power state changes and
// gives a new VM the "not running" state. It listens to the registry's updates,
// as the simulator's PropertyCollector does.
type toolsModel struct{}

func (t *toolsModel) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "RackcertToolsModel", Value: "tools-model"}
}

func (t *toolsModel) PutObject(obj mo.Reference) {
	if vm, ok := obj.(*simulator.VirtualMachine); ok && vm.Guest != nil {
		vm.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning)
		vm.Guest.GuestState = "notRunning"
		if vm.Guest.ToolsStatus == "" {
			vm.Guest.ToolsStatus = types.VirtualMachineToolsStatusToolsNotInstalled
		}
	}
}

func (t *toolsModel) RemoveObject(types.ManagedObjectReference) {}

func (t *toolsModel) UpdateObject(obj mo.Reference, changes []types.PropertyChange) {
	if task, ok := obj.(*mo.Task); ok { // CreateVM_Task sets a new VM's guest after Put
		if r, ok := task.Info.Result.(types.ManagedObjectReference); ok && r.Type == "VirtualMachine" {
			if vm, ok := simulator.Map.Get(r).(*simulator.VirtualMachine); ok && vm.Guest != nil &&
				vm.Guest.GuestState == "" {
				simulator.Map.Update(vm, []types.PropertyChange{{Name: "guest.guestState", Val: "notRunning"}})
			}
		}
		return
	}
	if obj.Reference().Type != "VirtualMachine" {
		return
	}
	vm, ok := simulator.Map.Get(obj.Reference()).(*simulator.VirtualMachine)
	if !ok {
		return
	}
	ours, guest := false, false
	for _, c := range changes {
		switch c.Name {
		case "runtime.powerState":
			simulator.Map.Update(vm, notRunning(vm))
			return
		case "guest.toolsRunningStatus": // every change this file makes carries it
			ours = true
		case "guest.ipAddress", "guest.hostName", "guest.net":
			guest = true
		}
	}
	if guest && !ours {
		// The simulator's shortcuts ("SET.guest.ipAddress" / "ip0" in extraConfig, its
		// customization at power-on) write guest fields; ESXi keeps such keys as plain
		// extraConfig. Put back what Tools reported.
		g := vm.Guest
		r := reported(vm)
		simulator.Map.Update(vm, guestChanges(vm, g.GuestState,
			types.VirtualMachineToolsRunningStatus(g.ToolsRunningStatus), g.ToolsStatus, g.ToolsVersion, r.ip, r.hostname))
	}
}

// toolsReport is what a VM's Tools reported since its last power change.
type toolsReport struct{ ip, hostname string }

var (
	reportsMu sync.Mutex
	reports   = map[types.ManagedObjectReference]toolsReport{}
)

func reported(vm *simulator.VirtualMachine) toolsReport {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	return reports[vm.Self]
}

func setReported(vm *simulator.VirtualMachine, r toolsReport) {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	reports[vm.Self] = r
}

// notRunning: the guest information of a VM whose Tools have not reported (yet).
// guest.net keeps one entry per virtual NIC (the simulator's CustomizeVM_Task
// counts them), without addresses.
func notRunning(vm *simulator.VirtualMachine) []types.PropertyChange {
	setReported(vm, toolsReport{})
	status := types.VirtualMachineToolsStatusToolsNotRunning
	if v := vm.Guest.ToolsVersion; v == "" || v == "0" { // Tools never ran here
		status = types.VirtualMachineToolsStatusToolsNotInstalled
	}
	return guestChanges(vm, "notRunning", types.VirtualMachineToolsRunningStatusGuestToolsNotRunning,
		status, vm.Guest.ToolsVersion, "", "")
}

func guestChanges(vm *simulator.VirtualMachine, state string, running types.VirtualMachineToolsRunningStatus,
	status types.VirtualMachineToolsStatus, version, ip, hostname string) []types.PropertyChange {
	nets := make([]types.GuestNicInfo, 0, len(vm.Guest.Net))
	for i, nic := range vm.Guest.Net {
		nic.IpAddress = nil
		nic.IpConfig = nil
		if i == 0 && ip != "" { // the primary address, on the first virtual NIC
			nic.IpAddress = []string{ip}
		}
		nets = append(nets, nic)
	}
	return []types.PropertyChange{
		{Name: "guest.guestState", Val: state},
		{Name: "guest.toolsRunningStatus", Val: string(running)},
		{Name: "guest.toolsStatus", Val: status},
		{Name: "guest.toolsVersion", Val: version},
		{Name: "guest.ipAddress", Val: ip},
		{Name: "guest.hostName", Val: hostname},
		{Name: "guest.net", Val: nets},
		{Name: "summary.guest.toolsRunningStatus", Val: string(running)},
		{Name: "summary.guest.toolsStatus", Val: status},
		{Name: "summary.guest.ipAddress", Val: ip},
		{Name: "summary.guest.hostName", Val: hostname},
	}
}

// guestRPC is the Tools channel: one RPCI command from the guest of the VM
// whose BIOS UUID ends the path, answered as the VMX does ("1 ..." or "0 ...").
func guestRPC(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || r.Method != http.MethodPost {
		http.Error(w, "the Tools channel is for the lab's guests on loopback", http.StatusForbidden)
		return
	}
	body, err := ioutil.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	uuid := strings.TrimPrefix(r.URL.Path, "/guestrpc/")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprint(w, rpci(uuid, string(body)))
}

// rpci carries out one command for the VM with BIOS UUID `uuid`.
func rpci(uuid, command string) string {
	vm := vmByUUID(uuid)
	if vm == nil {
		return "0 No virtual machine with that BIOS UUID"
	}
	if wait := bootWait(vm); wait > 0 { // clock.go: vmtoolsd runs once the guest has booted
		time.Sleep(wait)
	}
	reply := "1 "
	simulator.Map.WithLock(vm, func() {
		if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
			reply = "0 The virtual machine is not powered on"
			return
		}
		verb, rest := split(command)
		g := vm.Guest
		ip, name, version := g.IpAddress, g.HostName, g.ToolsVersion
		switch verb {
		case "tools.set.version":
			if _, err := strconv.ParseUint(rest, 10, 32); err != nil {
				reply = "0 Bad version"
				return
			}
			version = rest
		case "SetGuestInfo":
			kind, value := split(rest)
			switch n, _ := strconv.Atoi(kind); n {
			case infoDNSName:
				name = value
			case infoIPAddress:
				if net.ParseIP(value) == nil {
					reply = "0 Bad address"
					return
				}
				ip = value
			default:
				return // other kinds (disk, OS name, uptime...) are accepted and not modelled
			}
		default:
			reply = "0 Unknown command"
			return
		}
		setReported(vm, toolsReport{ip: ip, hostname: name})
		simulator.Map.Update(vm, guestChanges(vm, "running", types.VirtualMachineToolsRunningStatusGuestToolsRunning,
			types.VirtualMachineToolsStatusToolsOk, version, ip, name))
	})
	return reply
}

// split is the first word and the rest, as the VMX parses an RPCI command.
func split(s string) (string, string) {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], strings.TrimSpace(s[i:])
	}
	return s, ""
}

func vmByUUID(uuid string) *simulator.VirtualMachine {
	for _, obj := range simulator.Map.All("VirtualMachine") {
		if vm, ok := obj.(*simulator.VirtualMachine); ok && vm.Config != nil &&
			strings.EqualFold(vm.Config.Uuid, uuid) {
			return vm
		}
	}
	return nil
}
