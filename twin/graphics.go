package main

import (
	"fmt"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// GraphicsManager is HostGraphicsManager (vSphere API reference, 6.5+), which
// the simulator lacks. NVIDIA vGPU needs the host's default graphics type
// `sharedDirect` ("Shared Direct", NVIDIA Virtual GPU Software User Guide,
// "Configuring VMware vSphere to use NVIDIA vGPU"); ESXi's default is
// `shared` (vSGA). UpdateGraphicsConfig changes the configuration, which the
// host uses after a reboot (or an Xorg restart, which the twin does not
// model): HostConfigInfo.graphicsConfig shows the configured value.
type GraphicsManager struct {
	mo.HostGraphicsManager
	host *simulator.HostSystem
}

// activeGraphics is the graphics type each host booted with (host moid -> type).
var activeGraphics sync.Map

func newGraphicsManager(hs *simulator.HostSystem, kind string) types.ManagedObjectReference {
	if kind == "" {
		kind = "shared"
	}
	cfg := &types.HostGraphicsConfig{HostDefaultGraphicsType: kind, SharedPassthruAssignmentPolicy: "performance"}
	gm := &GraphicsManager{host: hs}
	gm.Self = types.ManagedObjectReference{Type: "HostGraphicsManager", Value: "graphicsManager-" + hs.Self.Value}
	gm.GraphicsConfig = cfg
	gm.SharedPassthruGpuTypes = hs.Config.SharedPassthruGpuTypes
	hs.Config.GraphicsConfig = cfg
	activeGraphics.Store(hs.Self.Value, kind)
	ref := simulator.Map.Put(gm).Reference()
	availability.own(ref, hs)
	return ref
}

// UpdateGraphicsConfig sets the default graphics type; in effect after a reboot.
func (g *GraphicsManager) UpdateGraphicsConfig(req *types.UpdateGraphicsConfig) soap.HasFault {
	body := new(methods.UpdateGraphicsConfigBody)
	switch req.Config.HostDefaultGraphicsType {
	case "shared", "sharedDirect":
	default:
		body.Fault_ = simulator.Fault(fmt.Sprintf("invalid hostDefaultGraphicsType %q",
			req.Config.HostDefaultGraphicsType), &types.InvalidArgument{InvalidProperty: "config.hostDefaultGraphicsType"})
		return body
	}
	cfg := req.Config
	simulator.Map.WithLock(g.host, func() {
		if g.host.Config.GraphicsConfig == nil ||
			g.host.Config.GraphicsConfig.HostDefaultGraphicsType != cfg.HostDefaultGraphicsType {
			g.host.Summary.RebootRequired = true
		}
		g.host.Config.GraphicsConfig = &cfg
	})
	g.GraphicsConfig = &cfg
	body.Res = new(types.UpdateGraphicsConfigResponse)
	return body
}

// bootGraphics is what a reboot does to graphics: the configured type becomes active.
func bootGraphics(hs *simulator.HostSystem) {
	if hs.Config.GraphicsConfig != nil {
		activeGraphics.Store(hs.Self.Value, hs.Config.GraphicsConfig.HostDefaultGraphicsType)
	}
}

// vgpuRefusal: a vGPU (vmiop) backing powers on only on a host running sharedDirect
// with that profile among its shared GPU types.
func vgpuRefusal(vm *simulator.VirtualMachine, hs *simulator.HostSystem, prefix string) string {
	active, _ := activeGraphics.Load(hs.Self.Value)
	for _, dev := range vm.Config.Hardware.Device {
		pt, ok := dev.(*types.VirtualPCIPassthrough)
		if !ok {
			continue
		}
		b, ok := pt.Backing.(*types.VirtualPCIPassthroughVmiopBackingInfo)
		if !ok {
			continue
		}
		if active != "sharedDirect" {
			return fmt.Sprintf("%s vGPU %s: the host %s's default graphics type is %v, not Shared Direct",
				prefix, b.Vgpu, hs.Name, active)
		}
		known := false
		for _, t := range hs.Config.SharedPassthruGpuTypes {
			known = known || t == b.Vgpu
		}
		if !known {
			return fmt.Sprintf("%s vGPU profile %s is not supported on host %s", prefix, b.Vgpu, hs.Name)
		}
	}
	return ""
}
