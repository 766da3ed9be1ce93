package main

import (
	"net"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// SearchIndex finds hosts and VMs the way vCenter's does (vSphere API
// reference, SearchIndex):
//   - FindByDnsName / FindAllByDnsName: "the DNS name for a virtual machine is
//     the one returned from VMware tools, hostName"; for a host, its DNS
//     configuration (hostName.domainName, hostidentity.go). DNS names compare
//     without regard to case (RFC 4343).
//   - FindByIp / FindAllByIp: "the IP address for a virtual machine is the one
//     returned from VMware tools, ipAddress" (and the guest's NICs, guest.net);
//     for a host, its VMkernel NICs' addresses. Addresses compare as addresses.
//   - FindByUuid / FindAllByUuid: a host's hardware.systemInfo.uuid; a VM's
//     config.uuid, or config.instanceUuid when instanceUuid is true.
//   - datacenter, when set, limits the search to that datacenter's inventory.
//
// govmomi 0.24's simulator compares only the bare host name against the DNS
// name and leaves every host at localhost / 127.0.0.1, so VMware's esxcli
// (`--vihost`) finds no host.
type SearchIndex struct {
	simulator.SearchIndex
}

func wrapSearchIndex(ref types.ManagedObjectReference) {
	si, ok := simulator.Map.Get(ref).(*simulator.SearchIndex)
	if !ok {
		return
	}
	simulator.Map.Put(&SearchIndex{SearchIndex: *si})
}

// inDatacenter: whether the entity lies under the datacenter (nil: anywhere).
func inDatacenter(e mo.Entity, dc *types.ManagedObjectReference) bool {
	if dc == nil {
		return true
	}
	for parent := e.Entity().Parent; parent != nil; {
		if *parent == *dc {
			return true
		}
		obj, ok := simulator.Map.Get(*parent).(mo.Entity)
		if !ok {
			return false
		}
		parent = obj.Entity().Parent
	}
	return false
}

func sameIP(a, b string) bool {
	x, y := net.ParseIP(strings.TrimSpace(a)), net.ParseIP(strings.TrimSpace(b))
	return x != nil && y != nil && x.Equal(y)
}

func sameDNS(a, b string) bool {
	a, b = strings.TrimSuffix(strings.TrimSpace(a), "."), strings.TrimSuffix(strings.TrimSpace(b), ".")
	return a != "" && strings.EqualFold(a, b)
}

// find is every entity of the kind (in the datacenter) that the test matches.
func find(kind string, dc *types.ManagedObjectReference, match func(mo.Entity) bool) []types.ManagedObjectReference {
	var refs []types.ManagedObjectReference
	for _, e := range simulator.Map.All(kind) {
		ok := false
		simulator.Map.WithLock(e, func() { ok = inDatacenter(e, dc) && match(e) })
		if ok {
			refs = append(refs, e.Reference())
		}
	}
	return refs
}

func hostDNSMatch(name string) func(mo.Entity) bool {
	return func(e mo.Entity) bool {
		hs, ok := e.(*simulator.HostSystem)
		if !ok || hs.Config == nil || hs.Config.Network == nil || hs.Config.Network.DnsConfig == nil {
			return false
		}
		return sameDNS(hostFQDN(hs.Config.Network.DnsConfig.GetHostDnsConfig()), name)
	}
}

func vmDNSMatch(name string) func(mo.Entity) bool {
	return func(e mo.Entity) bool {
		vm, ok := e.(*simulator.VirtualMachine)
		return ok && vm.Guest != nil && sameDNS(vm.Guest.HostName, name)
	}
}

func hostIPMatch(ip string) func(mo.Entity) bool {
	return func(e mo.Entity) bool {
		hs, ok := e.(*simulator.HostSystem)
		if !ok || hs.Config == nil || hs.Config.Network == nil {
			return false
		}
		for _, v := range hs.Config.Network.Vnic {
			if v.Spec.Ip != nil && sameIP(v.Spec.Ip.IpAddress, ip) {
				return true
			}
		}
		return false
	}
}

func vmIPMatch(ip string) func(mo.Entity) bool {
	return func(e mo.Entity) bool {
		vm, ok := e.(*simulator.VirtualMachine)
		if !ok || vm.Guest == nil {
			return false
		}
		if sameIP(vm.Guest.IpAddress, ip) {
			return true
		}
		for _, nic := range vm.Guest.Net {
			for _, a := range nic.IpAddress {
				if sameIP(a, ip) {
					return true
				}
			}
		}
		return false
	}
}

func uuidMatch(uuid string, vmSearch, instance bool) func(mo.Entity) bool {
	return func(e mo.Entity) bool {
		if vmSearch {
			vm, ok := e.(*simulator.VirtualMachine)
			if !ok || vm.Config == nil {
				return false
			}
			if instance {
				return strings.EqualFold(vm.Config.InstanceUuid, uuid)
			}
			return strings.EqualFold(vm.Config.Uuid, uuid)
		}
		hs, ok := e.(*simulator.HostSystem)
		return ok && hs.Hardware != nil && strings.EqualFold(hs.Hardware.SystemInfo.Uuid, uuid)
	}
}

func searchKind(vmSearch bool) string {
	if vmSearch {
		return "VirtualMachine"
	}
	return "HostSystem"
}

func first(refs []types.ManagedObjectReference) *types.ManagedObjectReference {
	if len(refs) == 0 {
		return nil
	}
	return &refs[0]
}

func (s *SearchIndex) dnsRefs(dc *types.ManagedObjectReference, name string, vmSearch bool) []types.ManagedObjectReference {
	if vmSearch {
		return find("VirtualMachine", dc, vmDNSMatch(name))
	}
	return find("HostSystem", dc, hostDNSMatch(name))
}

func (s *SearchIndex) ipRefs(dc *types.ManagedObjectReference, ip string, vmSearch bool) []types.ManagedObjectReference {
	if vmSearch {
		return find("VirtualMachine", dc, vmIPMatch(ip))
	}
	return find("HostSystem", dc, hostIPMatch(ip))
}

// FindByDnsName is SearchIndex.FindByDnsName.
func (s *SearchIndex) FindByDnsName(req *types.FindByDnsName) soap.HasFault {
	return &methods.FindByDnsNameBody{Res: &types.FindByDnsNameResponse{
		Returnval: first(s.dnsRefs(req.Datacenter, req.DnsName, req.VmSearch))}}
}

// FindAllByDnsName is SearchIndex.FindAllByDnsName.
func (s *SearchIndex) FindAllByDnsName(req *types.FindAllByDnsName) soap.HasFault {
	return &methods.FindAllByDnsNameBody{Res: &types.FindAllByDnsNameResponse{
		Returnval: s.dnsRefs(req.Datacenter, req.DnsName, req.VmSearch)}}
}

// FindByIp is SearchIndex.FindByIp.
func (s *SearchIndex) FindByIp(req *types.FindByIp) soap.HasFault {
	return &methods.FindByIpBody{Res: &types.FindByIpResponse{
		Returnval: first(s.ipRefs(req.Datacenter, req.Ip, req.VmSearch))}}
}

// FindAllByIp is SearchIndex.FindAllByIp.
func (s *SearchIndex) FindAllByIp(req *types.FindAllByIp) soap.HasFault {
	return &methods.FindAllByIpBody{Res: &types.FindAllByIpResponse{
		Returnval: s.ipRefs(req.Datacenter, req.Ip, req.VmSearch)}}
}

// FindByUuid is SearchIndex.FindByUuid.
func (s *SearchIndex) FindByUuid(req *types.FindByUuid) soap.HasFault {
	instance := req.InstanceUuid != nil && *req.InstanceUuid
	return &methods.FindByUuidBody{Res: &types.FindByUuidResponse{
		Returnval: first(find(searchKind(req.VmSearch), req.Datacenter, uuidMatch(req.Uuid, req.VmSearch, instance)))}}
}

// FindAllByUuid is SearchIndex.FindAllByUuid.
func (s *SearchIndex) FindAllByUuid(req *types.FindAllByUuid) soap.HasFault {
	instance := req.InstanceUuid != nil && *req.InstanceUuid
	return &methods.FindAllByUuidBody{Res: &types.FindAllByUuidResponse{
		Returnval: find(searchKind(req.VmSearch), req.Datacenter, uuidMatch(req.Uuid, req.VmSearch, instance))}}
}

// childrenOf is what SearchIndex.FindChild searches under an entity (vSphere API
// reference, SearchIndex.FindChild: "a datacenter's folders, a folder's child entities, a
// compute resource's hosts and root resource pool, a resource pool's pools and VMs").
func childrenOf(obj mo.Reference) []types.ManagedObjectReference {
	var children []types.ManagedObjectReference
	simulator.Map.WithLock(obj, func() {
		switch e := obj.(type) {
		case *simulator.Datacenter:
			children = []types.ManagedObjectReference{e.VmFolder, e.HostFolder, e.DatastoreFolder, e.NetworkFolder}
		case *simulator.Folder:
			children = append(children, e.ChildEntity...)
		case *mo.ComputeResource:
			children = append(append(children, e.Host...), *e.ResourcePool)
		case *simulator.ClusterComputeResource:
			children = append(append(children, e.Host...), *e.ResourcePool)
		case *simulator.ResourcePool:
			children = append(append(children, e.ResourcePool.ResourcePool...), e.Vm...)
		case *simulator.VirtualApp:
			children = append(append(children, e.ResourcePool.ResourcePool...), e.Vm...)
		}
	})
	return children
}

// registeredName is a child's inventory name, "" while the simulator is still building it.
// Networks keep their name in their own Name field (mo.Ancestors).
func registeredName(obj mo.Reference) string {
	name := ""
	simulator.Map.WithLock(obj, func() {
		switch e := obj.(type) {
		case *mo.Network:
			name = e.Name
		case *simulator.DistributedVirtualSwitch:
			name = e.Name
		case *simulator.DistributedVirtualPortgroup:
			name = e.Name
		case *mo.OpaqueNetwork:
			name = e.Name
		case mo.Entity:
			name = e.Entity().Name
		}
	})
	return name
}

// FindChild is SearchIndex.FindChild: the direct child of the entity with that name, or
// none. A vCenter entity is created with its name (CreateVM_Task's config.name is
// required, vSphere API reference, Folder.CreateVM_Task), so no child is ever nameless.
// govmomi 0.24's simulator adds a VM to its folder before configuring it
// (NewVirtualMachine: folderPutChild, then the name), and its FindChild panics on such a
// child ("does not have a Name") while a parallel clone is under way: a child still being
// built is not yet registered, and is skipped.
func (s *SearchIndex) FindChild(req *types.FindChild) soap.HasFault {
	body := &methods.FindChildBody{}
	obj := simulator.Map.Get(req.Entity)
	if obj == nil {
		body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: req.Entity})
		return body
	}
	body.Res = new(types.FindChildResponse)
	for _, ref := range childrenOf(obj) {
		child := simulator.Map.Get(ref)
		if child != nil && registeredName(child) == req.Name {
			found := child.Reference()
			body.Res.Returnval = &found
			return body
		}
	}
	return body
}
