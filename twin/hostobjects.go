package main

import (
	"reflect"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Every ESXi host has its configuration managers (vSphere API reference,
// HostConfigManager: cpuScheduler, memoryManager, vmotionSystem, vsanSystem,
// serviceSystem, powerSystem, ...), each a managed object of its own that a
// client may read. govmomi 0.24's simulator creates five of them per host and
// leaves the other references pointing at objects that do not exist, so
// community.vmware's vmware_host_facts fails on `configManager.vsanSystem`
// with ManagedObjectNotFound. addHostManagers creates the missing ones, one
// per host, with their properties unset unless the host has a value for them.
// A few host properties also point at the simulator's template host
// ("ha-host") and its datastore; they are pointed at the host itself.

// hostManagerOverrides are the managers whose own properties the rack's hosts have a value for.
func hostManagerOverrides(hs *simulator.HostSystem, obj interface{}) {
	switch m := obj.(type) {
	case *VsanSystem:
		// The rack's storage is NFS (PowerScale), not vSAN: HostVsanSystem.config
		// with enabled false (VsanHostConfigInfo), as on a host that never joined vSAN.
		m.Config = vsanHostConfig(hs)
	case *mo.HostPowerSystem:
		if hs.Config.PowerSystemInfo != nil {
			m.Info = *hs.Config.PowerSystemInfo
		}
		if hs.Config.PowerSystemCapability != nil {
			m.Capability = *hs.Config.PowerSystemCapability
		}
	}
}

func vsanHostConfig(hs *simulator.HostSystem) types.VsanHostConfigInfo {
	self := hs.Self
	return types.VsanHostConfigInfo{
		Enabled:     types.NewBool(false),
		HostSystem:  &self,
		ClusterInfo: &types.VsanHostConfigInfoClusterInfo{},
		StorageInfo: &types.VsanHostConfigInfoStorageInfo{AutoClaimStorage: types.NewBool(false)},
		NetworkInfo: &types.VsanHostConfigInfoNetworkInfo{},
	}
}

// addHostManagers gives the host every configuration manager its configManager names.
func addHostManagers(hs *simulator.HostSystem) {
	cm := reflect.ValueOf(&hs.ConfigManager).Elem()
	refType := reflect.TypeOf((*types.ManagedObjectReference)(nil))
	for i := 0; i < cm.NumField(); i++ {
		f := cm.Field(i)
		if f.Type() != refType || f.IsNil() {
			continue
		}
		ref := f.Interface().(*types.ManagedObjectReference)
		if simulator.Map.Get(*ref) != nil {
			continue
		}
		own := types.ManagedObjectReference{Type: ref.Type, Value: ref.Value + "-" + hs.Self.Value}
		if obj := newManagedObject(hs, own); obj != nil {
			simulator.Map.Put(obj)
			f.Set(reflect.ValueOf(&own))
			availability.own(own, hs)
		}
	}
	// HostSystem.datastoreBrowser: the simulator's browser, which searches datastores.
	browser := &simulator.HostDatastoreBrowser{}
	browser.Self = types.ManagedObjectReference{Type: "HostDatastoreBrowser", Value: "datastoreBrowser-" + hs.Self.Value}
	hs.DatastoreBrowser = simulator.Map.Put(browser).Reference()
	self := hs.Self
	hs.Config.Host = self
	hs.Summary.Host = &self
	hs.Config.CacheConfigurationInfo = nil // no host cache on the rack's datastores
	if hs.Config.VsanHostConfig != nil {
		cfg := vsanHostConfig(hs)
		hs.Config.VsanHostConfig = &cfg
	}
}

// newManagedObject is an empty managed object of ref's type (the mo type of that name).
func newManagedObject(hs *simulator.HostSystem, ref types.ManagedObjectReference) mo.Reference {
	var v interface{} = &VsanSystem{}
	if ref.Type != "HostVsanSystem" {
		var err error
		if v, err = mo.ObjectContentToType(types.ObjectContent{Obj: ref}, true); err != nil {
			return nil
		}
	}
	obj, ok := v.(mo.Reference)
	if !ok {
		return nil
	}
	if self := reflect.ValueOf(v).Elem().FieldByName("Self"); self.IsValid() && self.CanSet() {
		self.Set(reflect.ValueOf(ref))
	}
	hostManagerOverrides(hs, v)
	return obj
}

// VsanSystem is HostVsanSystem on a host that is not in a vSAN cluster.
type VsanSystem struct {
	mo.HostVsanSystem
}

// QueryHostStatus: "Queries this host's current runtime status for the VSAN
// service" (vSphere API reference, HostVsanSystem). Not a member of any vSAN
// cluster: health unknown, node state disabled (VsanHostHealthState,
// VsanHostClusterStatusState).
func (s *VsanSystem) QueryHostStatus(req *types.QueryHostStatus) soap.HasFault {
	return &methods.QueryHostStatusBody{Res: &types.QueryHostStatusResponse{
		Returnval: types.VsanHostClusterStatus{Health: "unknown", NodeState: types.VsanHostClusterStatusState{State: "disabled"}},
	}}
}
