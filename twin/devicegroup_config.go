package main

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// A VM takes a vendor device group through VirtualMachineConfigSpec.deviceGroups
// (vSphere API reference, "Since vSphere API Release 8.0.0.1"): the spec names the
// group (VirtualMachineVirtualDeviceGroupsVendorDeviceGroup: groupInstanceKey,
// deviceGroupName), and each of its devices in deviceChange carries
// VirtualDeviceDeviceGroupInfo (groupInstanceKey, sequenceId). The rules the twin
// holds, each from that reference or NVIDIA's documents:
//   - the group is taken whole, in one request: every member device is added in the
//     reconfiguration that adds the group (one per component, sequenceIds 0..n-1),
//     and removed together with it;
//   - the membership cannot be modified: no device joins or leaves a group the VM
//     already holds;
//   - the group must be one the VM's host lists (RetrieveVendorDeviceGroupInfo);
//   - one powered-on VM per partition: the GPUs of a Fabric Manager partition serve
//     one VM at a time (NVIDIA Fabric Manager User Guide, shared NVSwitch model: a
//     partition is activated for one VM; DirectPath I/O: a device belongs to one
//     powered-on VM), so a VM whose group shares a GPU with a running VM's group does
//     not power on;
//   - a vGPU group powers on only where the NVIDIA vGPU manager VIB is installed and
//     the host's default graphics type is Shared Direct (NVIDIA Virtual GPU Software
//     User Guide for VMware vSphere; the Shared Direct part is vgpuRefusal's).
// govmomi 0.24's VirtualMachineConfigSpec has no deviceGroups: the twin reads them
// from the request's XML itself.

// heldGroup is a device group a VM holds: its name and the keys of its member devices.
type heldGroup struct {
	Name    string
	Key     int32
	Members []int32
}

// vmGroups holds each VM's device groups (VM moid -> []heldGroup).
var vmGroups sync.Map

func groupsHeld(vm *simulator.VirtualMachine) []heldGroup {
	v, _ := vmGroups.Load(vm.Self.Value)
	held, _ := v.([]heldGroup)
	return held
}

// rawReconfig is the part of a ReconfigVM_Task request the twin reads itself.
type rawReconfig struct {
	Body struct {
		Req struct {
			Spec struct {
				DeviceGroups *struct {
					DeviceGroup []struct {
						GroupInstanceKey int32  `xml:"groupInstanceKey"`
						DeviceGroupName  string `xml:"deviceGroupName"`
					} `xml:"deviceGroup"`
				} `xml:"deviceGroups"`
				DeviceChange []struct {
					Operation string `xml:"operation"`
					Device    struct {
						Key             int32 `xml:"key"`
						DeviceGroupInfo *struct {
							GroupInstanceKey int32 `xml:"groupInstanceKey"`
							SequenceID       int32 `xml:"sequenceId"`
						} `xml:"deviceGroupInfo"`
					} `xml:"device"`
				} `xml:"deviceChange"`
			} `xml:"spec"`
		} `xml:"ReconfigVM_Task"`
	} `xml:"Body"`
}

// serveDeviceGroups answers a ReconfigVM_Task that adds or touches device groups:
// refused with a failed task, or applied by the simulator and recorded. false: the
// request does not concern device groups (the simulator answers it as before).
func serveDeviceGroups(w http.ResponseWriter, r *http.Request, method *simulator.Method, body []byte,
	next http.Handler) bool {
	if _, ok := method.Body.(*types.ReconfigVM_Task); !ok {
		return false
	}
	vm, ok := simulator.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok {
		return false
	}
	var req rawReconfig
	if err := xml.Unmarshal(body, &req); err != nil {
		return false
	}
	spec := req.Body.Req.Spec
	held := groupsHeld(vm)
	touches := spec.DeviceGroups != nil
	for _, dc := range spec.DeviceChange {
		touches = touches || dc.Device.DeviceGroupInfo != nil || memberOf(held, dc.Device.Key) != nil
	}
	if !touches {
		return false
	}
	wanted, msg := checkGroupRequest(vm, held, &req)
	if msg != "" {
		ref := failedTask(vm, method.Name, &types.InvalidArgument{InvalidProperty: "deviceGroups"}, msg)
		writeTaskResponse(w, method.Name, ref)
		return true
	}
	before := deviceKeys(vm)
	// The task adds and removes the devices when it ends (clock.go): the groups are recorded
	// then, from the devices it added; a request refused before its task starts records none.
	reconfigureDone.Store(vm.Self.Value, func() {
		added := []int32{}
		for k := range deviceKeys(vm) {
			if !before[k] {
				added = append(added, k)
			}
		}
		sort.Slice(added, func(a, b int) bool { return added[a] < added[b] })
		vmGroups.Store(vm.Self.Value, recordGroups(vm, held, wanted, added))
	})
	next.ServeHTTP(w, r)
	reconfigureDone.Delete(vm.Self.Value) // unclaimed: refused before a task started
	return true
}

// checkGroupRequest applies the rules above; it returns the groups the request adds
// (name -> the request's groupInstanceKey) or the fault's message.
func checkGroupRequest(vm *simulator.VirtualMachine, held []heldGroup, req *rawReconfig) (map[int32]string, string) {
	spec := req.Body.Req.Spec
	wanted := map[int32]string{}
	hs, _ := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	offered := map[string]DeviceGroupDesc{}
	if hs != nil {
		for _, g := range groupsOf(hs) {
			offered[g.Name] = g
		}
	}
	if spec.DeviceGroups != nil {
		for _, g := range spec.DeviceGroups.DeviceGroup {
			desc, ok := offered[g.DeviceGroupName]
			if !ok {
				return nil, fmt.Sprintf("device group %q is not a vendor device group of host %s",
					g.DeviceGroupName, hostName(hs))
			}
			for _, h := range held {
				if h.Name == g.DeviceGroupName {
					return nil, fmt.Sprintf("VM %s already holds device group %q: its membership"+
						" cannot be modified", vm.Name, g.DeviceGroupName)
				}
			}
			wanted[g.GroupInstanceKey] = desc.Name
		}
	}
	seqs := map[int32][]int32{}
	removed := map[int32]int{}
	for _, dc := range spec.DeviceChange {
		info := dc.Device.DeviceGroupInfo
		if h := memberOf(held, dc.Device.Key); h != nil {
			if dc.Operation != string(types.VirtualDeviceConfigSpecOperationRemove) {
				return nil, fmt.Sprintf("device %d belongs to device group %q of VM %s: its"+
					" membership cannot be modified", dc.Device.Key, h.Name, vm.Name)
			}
			removed[h.Key]++
			continue
		}
		if info == nil {
			continue
		}
		if _, ok := wanted[info.GroupInstanceKey]; !ok || dc.Operation != "add" {
			return nil, fmt.Sprintf("device %d names device group instance %d, which this request"+
				" does not add: a device joins a group only with the group, in one request",
				dc.Device.Key, info.GroupInstanceKey)
		}
		seqs[info.GroupInstanceKey] = append(seqs[info.GroupInstanceKey], info.SequenceID)
	}
	for key, name := range wanted {
		n := len(offered[name].GPUs)
		got := append([]int32(nil), seqs[key]...)
		sort.Slice(got, func(a, b int) bool { return got[a] < got[b] })
		ok := len(got) == n
		for i := range got {
			ok = ok && got[i] == int32(i)
		}
		if !ok {
			return nil, fmt.Sprintf("device group %q has %d devices: the request must add all of"+
				" them, sequenceId 0 to %d, in one reconfiguration (it adds %d)", name, n, n-1, len(got))
		}
	}
	for _, h := range held {
		if removed[h.Key] != 0 && removed[h.Key] != len(h.Members) {
			return nil, fmt.Sprintf("device group %q of VM %s has %d devices: they are removed"+
				" together, in one request (it removes %d)", h.Name, vm.Name, len(h.Members), removed[h.Key])
		}
	}
	return wanted, ""
}

// recordGroups is the VM's groups after the reconfiguration: those it kept, and the new
// ones with their member devices in the order the simulator keyed them.
func recordGroups(vm *simulator.VirtualMachine, held []heldGroup, wanted map[int32]string,
	added []int32) []heldGroup {
	now := deviceKeys(vm)
	out := []heldGroup{}
	next := int32(1)
	for _, h := range held {
		if len(h.Members) > 0 && now[h.Members[0]] {
			out = append(out, h)
			if h.Key >= next {
				next = h.Key + 1
			}
		}
	}
	keys := make([]int32, 0, len(wanted))
	for k := range wanted {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
	taken := map[int32]bool{}
	for _, k := range keys {
		g := groupByName(vm, wanted[k])
		members := []int32{}
		for _, key := range added {
			if !taken[key] && len(members) < len(g.GPUs) && isMember(vm, key, g) {
				members = append(members, key)
				taken[key] = true
			}
		}
		out = append(out, heldGroup{Name: g.Name, Key: next, Members: members})
		next++
	}
	return out
}

// isMember: the VM's device `key` is one the group brings (its vGPU profile, or one of its
// GPUs as a fixed passthrough backing); other devices added in the same request are not.
func isMember(vm *simulator.VirtualMachine, key int32, g DeviceGroupDesc) bool {
	member := false
	simulator.Map.WithLock(vm, func() {
		for _, d := range vm.Config.Hardware.Device {
			pt, ok := d.(*types.VirtualPCIPassthrough)
			if !ok || pt.Key != key {
				continue
			}
			switch b := pt.Backing.(type) {
			case *types.VirtualPCIPassthroughVmiopBackingInfo:
				member = g.Vgpu != "" && b.Vgpu == g.Vgpu
			case *types.VirtualPCIPassthroughDeviceBackingInfo:
				for _, id := range g.GPUs {
					member = member || (g.Vgpu == "" && b.Id == id)
				}
			}
		}
	})
	return member
}

func groupByName(vm *simulator.VirtualMachine, name string) DeviceGroupDesc {
	if hs, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem); ok {
		for _, g := range groupsOf(hs) {
			if g.Name == name {
				return g
			}
		}
	}
	return DeviceGroupDesc{}
}

func memberOf(held []heldGroup, key int32) *heldGroup {
	for i := range held {
		for _, m := range held[i].Members {
			if m == key {
				return &held[i]
			}
		}
	}
	return nil
}

func deviceKeys(vm *simulator.VirtualMachine) map[int32]bool {
	out := map[int32]bool{}
	simulator.Map.WithLock(vm, func() {
		for _, d := range vm.Config.Hardware.Device {
			out[d.GetVirtualDevice().Key] = true
		}
	})
	return out
}

func hostName(hs *simulator.HostSystem) string {
	if hs == nil {
		return "?"
	}
	return hs.Name
}

// deviceGroupRefusal is ESXi's power-on answer for a VM holding device groups, or "".
func deviceGroupRefusal(vm *simulator.VirtualMachine, hs *simulator.HostSystem, prefix string) string {
	mine := groupsHeld(vm)
	if len(mine) == 0 {
		return ""
	}
	for _, h := range mine {
		g := groupByName(vm, h.Name)
		if g.Vgpu != "" && !vgpuManagerPresent(hs) {
			return fmt.Sprintf("%s device group %q needs the NVIDIA vGPU manager, which host %s"+
				" does not run", prefix, h.Name, hs.Name)
		}
		for _, other := range vmsOn(hs) {
			if other.Self == vm.Self || other.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				continue
			}
			for _, oh := range groupsHeld(other) {
				if shared := sharedGPU(g, groupByName(other, oh.Name)); shared != "" {
					return fmt.Sprintf("%s device group %q shares GPU %s with group %q of powered-on"+
						" VM %s: a partition serves one VM at a time", prefix, h.Name, shared, oh.Name, other.Name)
				}
			}
		}
	}
	return ""
}

func sharedGPU(a, b DeviceGroupDesc) string {
	in := map[string]bool{}
	for _, g := range a.GPUs {
		in[g] = true
	}
	for _, g := range b.GPUs {
		if in[g] {
			return g
		}
	}
	return ""
}

// vgpuManagerPresent: the host runs the NVIDIA vGPU manager, read from the host's VIB list
// (hostsoftware.go), the same list `esxcli software vib list` shows.
func vgpuManagerPresent(hs *simulator.HostSystem) bool {
	return hasVGPUManager(hs)
}
