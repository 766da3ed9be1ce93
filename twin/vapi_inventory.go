package main

// The inventory a vLCM client looks identifiers up in: com.vmware.vcenter.cluster list and
// com.vmware.vcenter.host list (vSphere Automation API; the SDK's samples find a cluster's id
// by name this way), with their filters (names, clusters, hosts), from the same objects the
// SOAP API serves.

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func filterSet(filter map[string]interface{}, key string) map[string]bool {
	items := inStrings(filter[key])
	if len(items) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, s := range items {
		out[s] = true
	}
	return out
}

func init() {
	vapiOps["com.vmware.vcenter.cluster list"] = func(c *vapiCall) (interface{}, *vapiErr) {
		_, filter := unStruct(c.In["filter"])
		names, ids := filterSet(filter, "names"), filterSet(filter, "clusters")
		out := []interface{}{}
		for _, ref := range simulator.Map.All("ClusterComputeResource") {
			cl := ref.(*simulator.ClusterComputeResource)
			if (names != nil && !names[cl.Name]) || (ids != nil && !ids[cl.Self.Value]) {
				continue
			}
			out = append(out, st("com.vmware.vcenter.cluster.summary", obj{"cluster": cl.Self.Value,
				"name": cl.Name, "ha_enabled": false, "drs_enabled": false}))
		}
		return out, nil
	}
	vapiOps["com.vmware.vcenter.host list"] = func(c *vapiCall) (interface{}, *vapiErr) {
		_, filter := unStruct(c.In["filter"])
		names, ids, clusters := filterSet(filter, "names"), filterSet(filter, "hosts"), filterSet(filter, "clusters")
		out := []interface{}{}
		for _, ref := range simulator.Map.All("HostSystem") {
			hs := ref.(*simulator.HostSystem)
			var name, parent, conn, power string
			simulator.Map.WithLock(hs, func() {
				name = hs.Name
				if hs.Parent != nil {
					parent = hs.Parent.Value
				}
				conn, power = string(hs.Runtime.ConnectionState), string(hs.Runtime.PowerState)
			})
			if (names != nil && !names[name]) || (ids != nil && !ids[hs.Self.Value]) ||
				(clusters != nil && !clusters[parent]) {
				continue
			}
			state := map[string]string{string(types.HostSystemConnectionStateConnected): "CONNECTED",
				string(types.HostSystemConnectionStateNotResponding): "NOT_RESPONDING"}[conn]
			powerState := interface{}(nil)
			if power == string(types.HostSystemPowerStatePoweredOn) {
				powerState = "POWERED_ON"
			}
			out = append(out, st("com.vmware.vcenter.host.summary", obj{"host": hs.Self.Value, "name": name,
				"connection_state": orDefault(state, "DISCONNECTED"), "power_state": opt(powerState),
				"host_uuid": opt(nil)}))
		}
		return out, nil
	}
}
