package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/ioutil"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Interceptor sits in front of the simulator's SOAP handler. It answers the
// host calls the simulator cannot (RebootHost_Task), adds the ESXi rules the
// simulator does not enforce (no maintenance mode or reboot with powered-on
// VMs, no device or firmware change on a powered-on VM), and injects faults.
// Wrapping HostSystem objects in the registry, as example_extend_test.go does
// for VMs, is not possible for hosts: the simulator type-asserts
// *simulator.HostSystem in CreateVM and elsewhere.
type Interceptor struct {
	next http.Handler
	mu   sync.Mutex
	fail []FailFault
	slow map[string]time.Duration
	drop []DropFault
	boom []DropFault
}

// NewInterceptor wraps the simulator's handler with the given faults.
func NewInterceptor(next http.Handler, faults *Faults) *Interceptor {
	i := &Interceptor{next: next, slow: map[string]time.Duration{}}
	i.fail = append(i.fail, faults.Fail...)
	i.drop = append(i.drop, faults.Drop...)
	i.boom = append(i.boom, faults.Panic...)
	for _, s := range faults.Slow {
		i.slow[s.Method] = time.Duration(s.Ms) * time.Millisecond
	}
	return i
}

// handlerPanics counts the SOAP calls whose handler panicked: a vCenter answers
// every well-formed call, with a result or a fault, and never drops the
// connection (which clients such as rackcert treat as a transient network
// error and retry). Each one is logged with "handler panic" so the test
// session fails on it (tests/support/plugins/vcsim.py).
var handlerPanics int64

// recorder remembers whether the response has begun, so a panic can still be
// answered with a SOAP fault when nothing was written yet.
type recorder struct {
	http.ResponseWriter
	wrote bool
}

func (r *recorder) WriteHeader(code int) { r.wrote = true; r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Hijack lets the drop fault close the connection through the recorder.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if hj, ok := r.ResponseWriter.(http.Hijacker); ok {
		return hj.Hijack()
	}
	return nil, nil, fmt.Errorf("not a hijackable connection")
}

func (i *Interceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w}
	name := "?"
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler { // an injected dropped connection
			panic(v)
		}
		n := atomic.AddInt64(&handlerPanics, 1)
		log.Printf("rackcert-vcsim: handler panic #%d in %s: %v\n%s", n, name, v, debug.Stack())
		if !rec.wrote {
			// vSphere's catch-all fault: SystemError ("An internal error occurred").
			writeSoapFault(rec, "SystemError", fmt.Sprintf("internal error in %s: %v", name, v))
		}
	}()
	i.serve(rec, r, &name)
}

func (i *Interceptor) serve(w http.ResponseWriter, r *http.Request, name *string) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/sdk") {
		i.next.ServeHTTP(w, r)
		return
	}
	body, err := ioutil.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.Body = ioutil.NopCloser(bytes.NewReader(body))
	method, err := simulator.UnmarshalBody(types.TypeFunc(), body)
	if err != nil {
		i.next.ServeHTTP(w, r)
		return
	}
	*name = method.Name
	if sessions.expire(w, r, method.Name) { // sessions.go
		return
	}
	if take(&i.mu, i.boom, method.Name) {
		panic(fmt.Sprintf("injected handler panic on %s", method.Name))
	}
	if i.takeDrop(method.Name) {
		log.Printf("fault: dropping the connection on %s", method.Name)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	if d, ok := i.slow[method.Name]; ok {
		time.Sleep(d)
	}
	// Property reads (pyVmomi's Fetch, the PropertyCollector) are answered from vCenter's
	// inventory cache; methods that need the host itself fault while it reboots.
	if host := availability.unavailable(method.This, method.Body); host != "" && method.Name != "Fetch" {
		writeHostFault(w, host)
		return
	}
	if _, err := r.Cookie("vmware_soap_session"); err == nil {
		if answerRead(w, method) || answerEsxcli(w, method) { // shapes.go, esxcli.go
			return
		}
		if answerDeviceGroups(w, method) || answerConfigTarget(w, r, method, i.next) { // devicegroups.go
			return
		}
		// A request that adds or touches device groups is judged first; its change then runs
		// as any ReconfigVM_Task does (the rules and timed task of i.handle, then the simulator).
		task := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { i.serveTask(w, r, method) })
		if serveDeviceGroups(w, r, method, body, task) { // devicegroup_config.go
			return
		}
		if answerGuestOps(w, method) { // guestops.go: ToolsUnavailable without Tools
			return
		}
		replaceField(method) // customfields.go: SetField replaces, as vCenter's does
		i.serveTask(w, r, method)
		return
	}
	i.next.ServeHTTP(w, r)
}

// serveTask answers a call through the twin's own handling (handle), else the simulator's.
func (i *Interceptor) serveTask(w http.ResponseWriter, r *http.Request, method *simulator.Method) {
	if task := i.handle(method); task != nil {
		writeTaskResponse(w, method.Name, *task)
		return
	}
	i.next.ServeHTTP(w, r)
}

func (i *Interceptor) takeDrop(name string) bool {
	return take(&i.mu, i.drop, name)
}

// take uses up one of the faults for method `name`, if any is left.
func take(mu *sync.Mutex, faults []DropFault, name string) bool {
	mu.Lock()
	defer mu.Unlock()
	for k := range faults {
		if faults[k].Method == name && faults[k].Count != 0 {
			faults[k].Count--
			return true
		}
	}
	return false
}

func (i *Interceptor) takeFail(name string, target string) *FailFault {
	i.mu.Lock()
	defer i.mu.Unlock()
	for k := range i.fail {
		f := &i.fail[k]
		if f.Method == name && f.Count != 0 && (f.Target == "" || f.Target == target) {
			f.Count--
			copy := *f
			return &copy
		}
	}
	return nil
}

// handle answers the calls the twin changes; nil means "let the simulator answer".
func (i *Interceptor) handle(method *simulator.Method) *types.ManagedObjectReference {
	obj := simulator.Map.Get(method.This)
	if obj == nil {
		return nil
	}
	if strings.HasSuffix(method.Name, "_Task") {
		if f := i.takeFail(method.Name, entityName(obj)); f != nil {
			msg := f.Message
			if msg == "" {
				msg = fmt.Sprintf("injected fault: %s on %s failed", method.Name, entityName(obj))
			}
			log.Printf("fault: %s", msg)
			ref := failedTask(obj, method.Name, &types.SystemError{Reason: msg}, msg)
			return &ref
		}
	}
	switch req := method.Body.(type) {
	case *types.RebootHost_Task:
		hs := obj.(*simulator.HostSystem)
		ref := rebootTask(hs, req.Force)
		return &ref
	case *types.CloneVM_Task:
		if vm, ok := obj.(*simulator.VirtualMachine); ok && vm.Config.Template {
			ref := cloneTask(vm, req) // template.go: CloneVM_Task as vCenter does it
			return &ref
		}
	case *types.EnterMaintenanceMode_Task:
		ref := enterMaintenance(obj.(*simulator.HostSystem), req)
		return &ref
	case *types.ExitMaintenanceMode_Task:
		ref := exitMaintenance(obj.(*simulator.HostSystem))
		return &ref
	case *types.PowerOnVM_Task:
		vm := obj.(*simulator.VirtualMachine)
		if f, msg := powerOnFault(vm); f != nil { // poweron.go
			ref := failedTask(vm, method.Name, f, msg)
			return &ref
		}
		ref := powerOnTask(vm) // clock.go
		return &ref
	case *types.PowerOffVM_Task:
		if vm := obj.(*simulator.VirtualMachine); isAgent(vm) {
			restartAgentLater(vm)
		}
	case *types.PowerOnMultiVM_Task:
		ref := powerOnMultiTask(obj, req.Vm) // poweron.go: each VM through ESXi's power-on checks
		return &ref
	case *types.CreateVM_Task:
		if f, msg := placementRefusal(req.Host, "deploying "+req.Config.Name); f != nil { // hoststate.go
			ref := failedTask(obj, method.Name, f, msg)
			return &ref
		}
	case *types.RelocateVM_Task:
		if f, msg := moveRefusal(obj.(*simulator.VirtualMachine), req.Spec.Host); f != nil {
			ref := failedTask(obj, method.Name, f, msg)
			return &ref
		}
	case *types.MigrateVM_Task:
		if f, msg := moveRefusal(obj.(*simulator.VirtualMachine), req.Host); f != nil {
			ref := failedTask(obj, method.Name, f, msg)
			return &ref
		}
	case *types.CreateSnapshot_Task:
		if f, msg := snapshotRefusal(obj.(*simulator.VirtualMachine)); f != nil {
			ref := failedTask(obj, method.Name, f, msg)
			return &ref
		}
	case *types.SuspendVM_Task:
		if f, msg := suspendRefusal(obj.(*simulator.VirtualMachine)); f != nil {
			ref := failedTask(obj, method.Name, f, msg)
			return &ref
		}
	case *types.ReconfigVM_Task:
		vm := obj.(*simulator.VirtualMachine)
		if f, msg := memoryRefusal(vm, &req.Spec); f != nil {
			ref := failedTask(vm, method.Name, f, msg)
			return &ref
		}
		if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && coldOnly(&req.Spec) {
			msg := fmt.Sprintf("VM %s is powered on: PCI passthrough devices, firmware and memory"+
				" reservation can only change while it is powered off", vm.Name)
			ref := failedTask(vm, method.Name, &types.InvalidPowerState{
				RequestedState: types.VirtualMachinePowerStatePoweredOff,
				ExistingState:  types.VirtualMachinePowerStatePoweredOn,
			}, msg)
			return &ref
		}
		ref := reconfigureTask(vm, req.Spec) // clock.go
		return &ref
	}
	return nil
}

// coldOnly: what ESXi refuses to change on a running VM (passthrough devices
// cannot be hot-added; firmware and the locked reservation need a power cycle).
func coldOnly(spec *types.VirtualMachineConfigSpec) bool {
	for _, dc := range spec.DeviceChange {
		if _, ok := dc.GetVirtualDeviceConfigSpec().Device.(*types.VirtualPCIPassthrough); ok {
			return true
		}
	}
	return spec.Firmware != "" || spec.MemoryReservationLockedToMax != nil
}

func entityName(obj mo.Reference) string {
	if e, ok := obj.(mo.Entity); ok {
		return e.Entity().Name
	}
	return obj.Reference().Value
}

func poweredOnVMs(hs *simulator.HostSystem) int {
	n := 0
	for _, ref := range hs.Vm {
		if vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine); ok &&
			vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			n++
		}
	}
	return n
}

// rebootTask reboots a host the way ESXi allows: in maintenance mode (unless
// forced) and never under powered-on VMs.
func rebootTask(hs *simulator.HostSystem, force bool) types.ManagedObjectReference {
	if !force && !hs.Runtime.InMaintenanceMode {
		return failedTask(hs, "RebootHost_Task", &types.InvalidState{},
			fmt.Sprintf("host %s is not in maintenance mode: enter it before rebooting", hs.Name))
	}
	if n := poweredOnVMs(hs); n > 0 {
		return failedTask(hs, "RebootHost_Task", &types.InvalidState{},
			fmt.Sprintf("host %s has %d powered-on VM(s) and cannot be rebooted", hs.Name, n))
	}
	task := simulator.CreateTask(hs, "rebootHost", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		startReboot(hs)
		return nil, nil
	})
	return task.Run()
}

// failedTask returns a task that ends in `fault` with a readable message (the
// simulator's own Task.Run puts the Go type name in localizedMessage).
func failedTask(obj mo.Reference, name string, fault types.BaseMethodFault, msg string) types.ManagedObjectReference {
	task := simulator.CreateTask(obj, strings.TrimSuffix(name, "_Task")+"Task", nil)
	now := time.Now()
	simulator.Map.Update(task, []types.PropertyChange{
		{Name: "info.startTime", Val: now},
		{Name: "info.state", Val: types.TaskInfoStateRunning},
	})
	simulator.Map.Update(task, []types.PropertyChange{
		{Name: "info.completeTime", Val: now},
		{Name: "info.state", Val: types.TaskInfoStateError},
		{Name: "info.error", Val: types.LocalizedMethodFault{Fault: fault, LocalizedMessage: msg}},
	})
	return task.Self
}

func writeTaskResponse(w http.ResponseWriter, method string, task types.ManagedObjectReference) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"`+
		` xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"`+
		` xmlns:xsd="http://www.w3.org/2001/XMLSchema"`+
		` xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`+
		`<soapenv:Body><%sResponse xmlns="urn:vim25"><returnval type="Task">%s</returnval>`+
		`</%sResponse></soapenv:Body></soapenv:Envelope>`, method, task.Value, method)
}
