package main

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// Reading device groups back (vSphere API reference 8.0.0.1): a VM's
// VirtualMachineConfigInfo.deviceGroups lists the groups it holds
// (VirtualMachineVirtualDeviceGroups, each a
// VirtualMachineVirtualDeviceGroupsVendorDeviceGroup with groupInstanceKey and
// deviceGroupName), and each member device carries VirtualDevice.deviceGroupInfo
// (groupInstanceKey, sequenceId). govmomi 0.24's types have neither field, so the
// twin declares types of the same XML names with the field added and puts them in
// the PropertyCollector's answers (collector.go) for the paths that hold them:
// config, config.hardware, config.hardware.device and config.deviceGroups.

// VirtualDeviceDeviceGroupInfo is VirtualDevice.deviceGroupInfo.
type VirtualDeviceDeviceGroupInfo struct {
	types.DynamicData
	GroupInstanceKey int32 `xml:"groupInstanceKey"`
	SequenceId       int32 `xml:"sequenceId"` //nolint:revive // the API's name
}

// VirtualPCIPassthrough is the API type of that name with deviceGroupInfo (8.0.0.1).
type VirtualPCIPassthrough struct {
	types.VirtualPCIPassthrough
	DeviceGroupInfo *VirtualDeviceDeviceGroupInfo `xml:"deviceGroupInfo,omitempty"`
}

// VirtualMachineVirtualDeviceGroupsVendorDeviceGroup is one group a VM holds.
type VirtualMachineVirtualDeviceGroupsVendorDeviceGroup struct {
	types.DynamicData
	GroupInstanceKey int32  `xml:"groupInstanceKey"`
	DeviceGroupName  string `xml:"deviceGroupName"`
}

// VirtualMachineVirtualDeviceGroups is VirtualMachineConfigInfo.deviceGroups.
type VirtualMachineVirtualDeviceGroups struct {
	types.DynamicData
	DeviceGroup []interface{} `xml:"deviceGroup,omitempty,typeattr"`
}

// VirtualMachineConfigInfo is the API type of that name with deviceGroups (8.0.0.1).
type VirtualMachineConfigInfo struct {
	types.VirtualMachineConfigInfo
	DeviceGroups *VirtualMachineVirtualDeviceGroups `xml:"deviceGroups,omitempty"`
}

const deviceGroupsPath = "config.deviceGroups"

func groupsValue(held []heldGroup) *VirtualMachineVirtualDeviceGroups {
	out := &VirtualMachineVirtualDeviceGroups{}
	for _, h := range held {
		out.DeviceGroup = append(out.DeviceGroup, &VirtualMachineVirtualDeviceGroupsVendorDeviceGroup{
			GroupInstanceKey: h.Key, DeviceGroupName: h.Name,
		})
	}
	return out
}

// withGroupInfo is the VM's device list with deviceGroupInfo on each group member.
func withGroupInfo(devices []types.BaseVirtualDevice, held []heldGroup) []types.BaseVirtualDevice {
	out := make([]types.BaseVirtualDevice, len(devices))
	for i, d := range devices {
		out[i] = d
		pt, ok := d.(*types.VirtualPCIPassthrough)
		if !ok {
			continue
		}
		for _, h := range held {
			for seq, key := range h.Members {
				if key == pt.Key {
					out[i] = &VirtualPCIPassthrough{VirtualPCIPassthrough: *pt,
						DeviceGroupInfo: &VirtualDeviceDeviceGroupInfo{GroupInstanceKey: h.Key, SequenceId: int32(seq)}}
				}
			}
		}
	}
	return out
}

// decorateGroups adds a VM's device groups to the properties read of it; wantGroups:
// config.deviceGroups was asked for by name (the simulator does not know the path).
func decorateGroups(oc *types.ObjectContent, wantGroups bool) {
	vm, ok := simulator.Map.Get(oc.Obj).(*simulator.VirtualMachine)
	if !ok {
		return
	}
	held := groupsHeld(vm)
	if len(held) == 0 {
		return // unset, as vCenter sends an optional property with nothing in it
	}
	if wantGroups {
		oc.PropSet = append(oc.PropSet, types.DynamicProperty{Name: deviceGroupsPath, Val: groupsValue(held)})
	}
	for i := range oc.PropSet {
		p := &oc.PropSet[i]
		switch v := p.Val.(type) {
		case types.ArrayOfVirtualDevice:
			p.Val = types.ArrayOfVirtualDevice{VirtualDevice: withGroupInfo(v.VirtualDevice, held)}
		case *types.ArrayOfVirtualDevice: // the simulator's value of config.hardware.device
			p.Val = &types.ArrayOfVirtualDevice{VirtualDevice: withGroupInfo(v.VirtualDevice, held)}
		case types.VirtualHardware:
			v.Device = withGroupInfo(v.Device, held)
			p.Val = v
		case types.VirtualMachineConfigInfo:
			v.Hardware.Device = withGroupInfo(v.Hardware.Device, held)
			p.Val = VirtualMachineConfigInfo{VirtualMachineConfigInfo: v, DeviceGroups: groupsValue(held)}
		}
	}
}
