package main

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// RebootDesc is how long a host reboot takes, as vCenter shows it.
//
// vSphere API reference, HostSystem.RebootHost_Task: the task "completes when
// the host has accepted the reboot", not when it is back. vCenter keeps the
// host `connected` until its heartbeat times out, shows it `notResponding`
// (HostSystemConnectionState) while it boots, and reconnects it with a later
// runtime.bootTime (HostRuntimeInfo.bootTime). Meanwhile calls that need the
// host fault (HostCommunication; HostNotConnected once vCenter knows), and its
// power state is `unknown` while it does not respond (HostSystemPowerState).
type RebootDesc struct {
	ConnectedMs int `json:"connected_ms"` // still shown connected after the task completes
	DownMs      int `json:"down_ms"`      // shown notResponding
}

// hostAvailability tracks the hosts that are rebooting, and which managed
// objects belong to which host (a call on its option manager needs the host).
type hostAvailability struct {
	mu      sync.Mutex
	down    map[string]bool   // host moid -> rebooting
	ownerOf map[string]string // moid of a host-side object -> host moid
}

var availability = &hostAvailability{down: map[string]bool{}, ownerOf: map[string]string{}}

func (a *hostAvailability) own(obj types.ManagedObjectReference, host *simulator.HostSystem) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ownerOf[obj.Value] = host.Self.Value
}

func (a *hostAvailability) setDown(host *simulator.HostSystem, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down[host.Self.Value] = down
}

// unavailable names the rebooting host a call on `this` (or with `host` as its
// argument) would need, or "" when the call can go ahead.
func (a *hostAvailability) unavailable(this types.ManagedObjectReference, body interface{}) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	moid := this.Value
	if owner, ok := a.ownerOf[moid]; ok {
		moid = owner
	}
	if this.Type == "HostSystem" || a.ownerOf[this.Value] != "" {
		if a.down[moid] {
			return moid
		}
	}
	// EnvironmentBrowser.QueryConfigTarget(host) asks the host for its devices.
	if q, ok := body.(*types.QueryConfigTarget); ok && q.Host != nil && a.down[q.Host.Value] {
		return q.Host.Value
	}
	return ""
}

func hostByMoid(moid string) *simulator.HostSystem {
	ref := types.ManagedObjectReference{Type: "HostSystem", Value: moid}
	hs, _ := simulator.Map.Get(ref).(*simulator.HostSystem)
	return hs
}

// writeHostFault answers a call that needs a rebooting host: HostCommunication
// while vCenter still shows it connected, HostNotConnected once it does not.
func writeHostFault(w http.ResponseWriter, hostMoid string) {
	hs := hostByMoid(hostMoid)
	name, state := hostMoid, types.HostSystemConnectionStateNotResponding
	if hs != nil {
		simulator.Map.WithLock(hs, func() { name, state = hs.Name, hs.Runtime.ConnectionState })
	}
	kind := "HostNotConnected"
	msg := fmt.Sprintf("Host %s is not responding", name)
	if state == types.HostSystemConnectionStateConnected {
		kind = "HostCommunication"
		msg = fmt.Sprintf("An error occurred while communicating with host %s", name)
	}
	writeSoapFault(w, kind, msg)
}

// writeSoapFault writes a SOAP fault whose detail is an empty fault of `kind`
// (enough for HostCommunication and its subtypes, which carry no fields).
func writeSoapFault(w http.ResponseWriter, kind, msg string) {
	var esc strings.Builder
	_ = xml.EscapeText(&esc, []byte(msg))
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"`+
		` xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"`+
		` xmlns:xsd="http://www.w3.org/2001/XMLSchema"`+
		` xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`+
		`<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode>`+
		`<faultstring>%s</faultstring><detail><%sFault xmlns="urn:vim25" xsi:type="%s"></%sFault>`+
		`</detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>`, esc.String(), kind, kind, kind)
}

// rebootTiming is the description's reboot timing (set once at start).
var rebootTiming RebootDesc

// startReboot accepts a reboot and plays the sequence vCenter shows: connected,
// notResponding (power state unknown), then connected again with a later
// bootTime. What waits for a boot (passthrough activation, boot options) takes
// effect when the host comes back. The host stays in maintenance mode
// (HostSystem.ExitMaintenanceMode_Task is a separate call).
func startReboot(hs *simulator.HostSystem) {
	availability.setDown(hs, true)
	connected, down := rebootPhases() // clock.go
	go func() {
		time.Sleep(connected)
		simulator.Map.WithLock(hs, func() {
			hs.Runtime.ConnectionState = types.HostSystemConnectionStateNotResponding
			hs.Runtime.PowerState = types.HostSystemPowerStateUnknown
		})
		time.Sleep(down)
		simulator.Map.WithLock(hs, func() {
			reboot(hs)
			// Up before vCenter shows it connected: a client that sees "connected" can call it.
			availability.setDown(hs, false)
			hs.Runtime.ConnectionState = types.HostSystemConnectionStateConnected
			hs.Runtime.PowerState = types.HostSystemPowerStatePoweredOn
		})
	}()
}

// Refresh is HostPciPassthruSystem.Refresh: "Refresh the available PciPassthru
// information" (vSphere API reference). The twin's pciPassthruInfo property is
// a snapshot taken at the last Refresh or UpdatePassthruConfig, so a client
// that does not refresh after a reboot reads the state from before it.
func (p *PciPassthruSystem) Refresh(req *types.Refresh) soap.HasFault {
	p.PciPassthruInfo = snapshotPassthru(p.host.Config.PciPassthruInfo)
	return &methods.RefreshBody{Res: new(types.RefreshResponse)}
}

func snapshotPassthru(infos []types.BaseHostPciPassthruInfo) []types.BaseHostPciPassthruInfo {
	out := make([]types.BaseHostPciPassthruInfo, 0, len(infos))
	for _, info := range infos {
		copy := *info.GetHostPciPassthruInfo()
		out = append(out, &copy)
	}
	return out
}
