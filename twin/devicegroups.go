package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// Vendor device groups, vSphere API release 8.0.0.1 (vSphere Web Services API
// reference): a host lists the sets of devices a VM must take together,
//   - HostAssignableHardwareManager.RetrieveVendorDeviceGroupInfo() returns
//     VirtualMachineVendorDeviceGroupInfo[] ("Since vSphere API Release 8.0.0.1");
//   - EnvironmentBrowser.QueryConfigTarget(host).vendorDeviceGroupInfo lists the
//     same groups to the VM's configuration (ConfigTarget, "Since 8.0.0.1").
// Each VirtualMachineVendorDeviceGroupInfo has deviceGroupName, an optional
// deviceGroupDescription and componentDeviceInfo[]: type (a
// VirtualMachineVendorDeviceGroupInfoComponentDeviceInfoComponentType:
// pciPassthru, nvidiaVgpu, sriovNic, dvx), vendorName, deviceName,
// isConfigurable and the VirtualDevice a VM gets. NVIDIA's GPU manager in ESXi
// reports NVLink-bridged PCIe pairs and the NVSwitch partitions of an HGX board
// this way (VMware, "vSphere 8 device groups"; NVIDIA AI Enterprise on NVSwitch
// systems: the GPUs of a VM form one Fabric Manager partition, vGPU only).
// The groups come from the host's hardware, which rackcert/lab/twin.py puts in
// the description (HostDesc.DeviceGroups). govmomi 0.24 predates all of these
// types, so the twin declares the request and writes the answer's XML itself,
// as it does for esxcli.

// RetrieveVendorDeviceGroupInfoRequest is HostAssignableHardwareManager.RetrieveVendorDeviceGroupInfo.
type RetrieveVendorDeviceGroupInfoRequest struct {
	This types.ManagedObjectReference `xml:"_this"`
}

func init() {
	types.Add("RetrieveVendorDeviceGroupInfo", reflect.TypeOf((*RetrieveVendorDeviceGroupInfoRequest)(nil)).Elem())
}

// hostGroups holds each host's vendor device groups (host moid -> []DeviceGroupDesc).
var hostGroups sync.Map

// groupsManagerHost maps a HostAssignableHardwareManager moid to its host.
var groupsManagerHost sync.Map

// addDeviceGroups gives a vSphere 8 host its device groups and the
// HostAssignableHardwareManager that lists them (HostConfigManager
// .assignableHardwareManager, API 7.0+). A 7.0.3 vCenter or host has no device
// groups: nothing is added, and its configManager stays as the 7.0.3 twin has it.
func addDeviceGroups(hs *simulator.HostSystem, hd *HostDesc) {
	if !speaksDeviceGroups(hd.Version) {
		return
	}
	hostGroups.Store(hs.Self.Value, append([]DeviceGroupDesc(nil), hd.DeviceGroups...))
	ref := types.ManagedObjectReference{Type: "HostAssignableHardwareManager", Value: "assignableHardwareManager"}
	hs.ConfigManager.AssignableHardwareManager = &ref
	// addHostManagers (hostobjects.go) makes the host's own object: "<value>-<host moid>".
	groupsManagerHost.Store(ref.Value+"-"+hs.Self.Value, hs.Self)
}

func groupsOf(hs *simulator.HostSystem) []DeviceGroupDesc {
	v, _ := hostGroups.Load(hs.Self.Value)
	groups, _ := v.([]DeviceGroupDesc)
	return groups
}

// answerDeviceGroups answers RetrieveVendorDeviceGroupInfo; false: not that call.
func answerDeviceGroups(w http.ResponseWriter, method *simulator.Method) bool {
	if _, ok := method.Body.(*RetrieveVendorDeviceGroupInfoRequest); !ok {
		return false
	}
	ref, ok := groupsManagerHost.Load(method.This.Value)
	if !ok {
		writeSoapFault(w, "ManagedObjectNotFound", "no HostAssignableHardwareManager "+method.This.Value)
		return true
	}
	hs, ok := simulator.Map.Get(ref.(types.ManagedObjectReference)).(*simulator.HostSystem)
	if !ok {
		writeSoapFault(w, "ManagedObjectNotFound", "host of "+method.This.Value+" is gone")
		return true
	}
	var out strings.Builder
	for _, g := range groupsOf(hs) {
		out.WriteString(`<returnval xsi:type="VirtualMachineVendorDeviceGroupInfo">`)
		out.WriteString(groupXML(hs, g))
		out.WriteString(`</returnval>`)
	}
	writeRaw(w, "RetrieveVendorDeviceGroupInfo", out.String())
	return true
}

// answerConfigTarget adds ConfigTarget.vendorDeviceGroupInfo to the answer of
// QueryConfigTarget (ConfigTargetBrowser in rack.go) for the hosts asked about;
// false: not that call, or no host with device groups (the answer is the
// simulator's, untouched).
func answerConfigTarget(w http.ResponseWriter, r *http.Request, method *simulator.Method, next http.Handler) bool {
	req, ok := method.Body.(*types.QueryConfigTarget)
	if !ok {
		return false
	}
	browser, ok := simulator.Map.Get(method.This).(*ConfigTargetBrowser)
	if !ok {
		return false
	}
	hosts := browser.cluster.Host
	if req.Host != nil {
		hosts = []types.ManagedObjectReference{*req.Host}
	}
	var extra strings.Builder
	for _, ref := range hosts {
		if hs, ok := simulator.Map.Get(ref).(*simulator.HostSystem); ok {
			for _, g := range groupsOf(hs) {
				extra.WriteString("<vendorDeviceGroupInfo>" + groupXML(hs, g) + "</vendorDeviceGroupInfo>")
			}
		}
	}
	if extra.Len() == 0 {
		return false
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	end := bytes.LastIndex(body, []byte("</returnval>"))
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	if rec.Code != http.StatusOK || end < 0 {
		_, _ = w.Write(body)
		return true
	}
	_, _ = w.Write(body[:end])
	_, _ = w.Write([]byte(extra.String()))
	_, _ = w.Write(body[end:])
	return true
}

// groupXML is one VirtualMachineVendorDeviceGroupInfo's content: the
// VirtualMachineTargetInfo name, the group's name and description, and one
// componentDeviceInfo per GPU with the device a VM takes (a VirtualPCIPassthrough
// with a vGPU (VMIOP) backing, or a fixed passthrough backing for a PCIe pair).
func groupXML(hs *simulator.HostSystem, g DeviceGroupDesc) string {
	names, ids := map[string]string{}, map[string]int16{}
	for _, d := range hs.Hardware.PciDevice {
		names[d.Id], ids[d.Id] = d.DeviceName, d.DeviceId
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<name>%s</name><deviceGroupName>%s</deviceGroupName>", esc(g.Name), esc(g.Name))
	if g.Description != "" {
		fmt.Fprintf(&b, "<deviceGroupDescription>%s</deviceGroupDescription>", esc(g.Description))
	}
	for i, id := range g.GPUs {
		if i < len(g.DeviceNames) {
			names[id] = g.DeviceNames[i]
		}
		kind, backing := "pciPassthru", fmt.Sprintf(
			`<backing xsi:type="VirtualPCIPassthroughDeviceBackingInfo"><deviceName>%s</deviceName>`+
				`<id>%s</id><deviceId>%x</deviceId><systemId>%s</systemId><vendorId>%d</vendorId></backing>`,
			esc(names[id]), esc(id), uint16(ids[id]), esc(passthruSystemID(hs)), nvidiaVendorID)
		if g.Vgpu != "" {
			kind = "nvidiaVgpu"
			backing = fmt.Sprintf(`<backing xsi:type="VirtualPCIPassthroughVmiopBackingInfo"><vgpu>%s</vgpu></backing>`,
				esc(g.Vgpu))
		}
		fmt.Fprintf(&b, "<componentDeviceInfo><type>%s</type><vendorName>NVIDIA Corporation</vendorName>"+
			"<deviceName>%s</deviceName><isConfigurable>true</isConfigurable>"+
			`<device xsi:type="VirtualPCIPassthrough"><key>%d</key>%s</device></componentDeviceInfo>`,
			kind, esc(names[id]), -200-i, backing)
	}
	return b.String()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// nvidiaVendorID is NVIDIA's PCI vendor ID (PCI-SIG: 0x10de), as VirtualPCIPassthroughDeviceBackingInfo.vendorId.
const nvidiaVendorID = 0x10de
