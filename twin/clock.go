package main

// The twin's clock: how long a real rack takes, shrunk by one scale factor.
//
// On a real rack a host reboot takes minutes and a full clone takes minutes, so
// the order in which a client drives vCenter decides how long a bring-up lasts.
// Every long operation of the twin therefore runs for a modelled duration: the
// seconds below are a real rack's, each with where the figure comes from, and
// `scale` (the description's clock.scale, or RACKCERT_TWIN_TIME_SCALE, which
// wins) multiplies them all: 1 is real time, tests run at 1/800. A benchmark
// divides the wall time it measures by the same factor to get real time back.
//
// While such a task runs, its TaskInfo reads as vCenter's do (vSphere API
// reference, TaskInfo): state `queued` while vCenter holds it back (limits.go),
// then `running` with startTime set and `progress` climbing from 0 to 100, then
// success or error with completeTime; the effect lands when the task ends.

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// ClockDesc is the description's clock block.
type ClockDesc struct {
	// Scale multiplies every modelled duration (0: 1, real time).
	Scale float64 `json:"scale"`
	// SessionIdleMs, when set, is the session idle timeout in wall milliseconds
	// (sessions.go), for a test that lets a session expire on purpose.
	SessionIdleMs int `json:"session_idle_ms"`
}

// Modelled durations, in seconds of a real rack.
const (
	// vCenter marks a host notResponding once its heartbeats have stopped for
	// vpxd's notResponding timeout (the vpxd setting
	// config.vpxd.heartbeat.notRespondingTimeout, 60 s by default).
	rebootConnectedS = 60.0
	// The reboot itself: POST of a Dell PowerEdge R750xa with 4 GPUs and a large
	// memory (memory training, option ROMs of the GPUs and two ConnectX-6), then
	// ESXi 7.0.3 loading and hostd reconnecting. No vendor publishes a figure for
	// this configuration; 8 minutes down after vCenter notices (9 in all) is the
	// twin's estimate from GPU servers of this class, to be replaced by a figure
	// measured on a real rack (docs/vsphere.md says how).
	rebootDownS = 480.0
	// EnterMaintenanceMode_Task on a host without VMs to move: vCenter runs the
	// pre-checks, powers off the vCLS agent and commits (vSphere Resource
	// Management, "Using Maintenance Mode"); a host without workload enters
	// in about 15 s.
	enterMaintenanceS = 15.0
	exitMaintenanceS  = 5.0
	// CloneVM_Task (full clone): vCenter creates the VM, then copies the
	// template's disks through the host's datastore stack at the datastore's
	// throughput. One copy stream to an NFS export over 25 GbE is bounded by the
	// link (3.1 GB/s) and in practice by the NFS client's single stream; the
	// twin takes 400 MB/s per clone (an estimate, like the 20 s of registration
	// and configuration copy).
	cloneSetupS   = 20.0
	cloneMBPerSec = 400.0
	// ReconfigVM_Task of a powered-off VM (devices, extraConfig, a disk grown
	// thin): a few seconds of hostd work.
	reconfigureS = 3.0
	// PowerOnVM_Task: ESXi admits the VM (DirectPath checks, memory reservation
	// locked: a VM with 1 TB reserved takes longer) and starts the VMX.
	powerOnS = 5.0
	// A cloud image (Ubuntu 22.04) with EFI firmware and passthrough GPUs boots
	// until open-vm-tools reports: EFI POST with large BARs, kernel, cloud-init's
	// first-boot network and SSH host keys (`cloud-init analyze show` measures
	// the cloud-init part on a real guest); the twin's estimate is 90 s.
	guestBootS = 90.0
	// vCenter 7.0 ends an API session idle for 30 minutes (vpxd's SOAP session
	// timeout; vSphere Web Services SDK Programming Guide, "Session management":
	// a session times out and the client must log in again).
	sessionIdleS = 1800.0
	// vLCM (vlcm.go), the twin's estimates: committing a draft validates the software
	// document against the depot; a compliance scan asks every host of the cluster for its
	// image; remediating one host stages the image's payloads and installs them (an ESXi base
	// image is a few hundred MB over the management network, then the bootbank is written)
	// before the host's reboot, which takes the reboot's own modelled time.
	vlcmCommitS  = 10.0
	vlcmScanS    = 30.0
	vlcmInstallS = 180.0
)

var (
	clockScale = 1.0
	clockDesc  ClockDesc
)

// setClock reads the scale from the description, the environment winning.
func setClock(desc ClockDesc) {
	clockDesc = desc
	if desc.Scale > 0 {
		clockScale = desc.Scale
	}
	if env := os.Getenv("RACKCERT_TWIN_TIME_SCALE"); env != "" {
		if v, err := strconv.ParseFloat(env, 64); err == nil && v > 0 {
			clockScale = v
		} else {
			log.Printf("rackcert-vcsim: ignoring RACKCERT_TWIN_TIME_SCALE=%q (not a positive number)", env)
		}
	}
	setSessionIdle()
}

// modelled is how long `seconds` of a real rack take on this twin.
func modelled(seconds float64) time.Duration {
	return time.Duration(seconds * clockScale * float64(time.Second))
}

// rebootPhases is how long a reboot shows connected, then notResponding: the
// description's milliseconds where a test sets them, else the modelled ones.
func rebootPhases() (time.Duration, time.Duration) {
	connected := modelled(rebootConnectedS)
	down := modelled(rebootDownS)
	if rebootTiming.ConnectedMs > 0 || rebootTiming.DownMs > 0 {
		connected = time.Duration(rebootTiming.ConnectedMs) * time.Millisecond
		down = time.Duration(rebootTiming.DownMs) * time.Millisecond
	}
	return connected, down
}

// cloneSeconds is a full clone of template t: setup plus its disks at the datastore's throughput.
func cloneSeconds(t *simulator.VirtualMachine) float64 {
	var kb int64
	for _, dev := range t.Config.Hardware.Device {
		if disk, ok := dev.(*types.VirtualDisk); ok {
			kb += disk.CapacityInKB
		}
	}
	return cloneSetupS + float64(kb)/1024/cloneMBPerSec
}

// timedTask is a task that waits for vCenter's limits (`costs`), runs for
// `seconds` of a real rack with its progress showing, then does `work` and ends
// with its result or fault.
func timedTask(obj mo.Reference, name string, seconds float64, costs []cost,
	work func() (types.AnyType, types.BaseMethodFault)) types.ManagedObjectReference {
	task := simulator.CreateTask(obj, name, nil) // state queued, queueTime now
	nameTask(task, obj, name)
	go func() {
		release := limits.acquire(costs)
		defer release()
		simulator.Map.WithLock(task, func() {
			simulator.Map.Update(task, []types.PropertyChange{
				{Name: "info.startTime", Val: time.Now()},
				{Name: "info.state", Val: types.TaskInfoStateRunning},
				{Name: "info.progress", Val: int32(0)},
			})
		})
		total := modelled(seconds)
		const steps = 10
		for i := 1; i < steps; i++ {
			time.Sleep(total / steps)
			p := int32(i * 100 / steps)
			simulator.Map.WithLock(task, func() {
				simulator.Map.Update(task, []types.PropertyChange{{Name: "info.progress", Val: p}})
			})
		}
		time.Sleep(total / steps)
		result, fault := work()
		finishTaskWith(task, result, fault)
	}()
	return task.Self
}

// nameTask gives a task the name vCenter gives it: TaskInfo.name is the method (a
// ManagedMethod, on the wire its WSDL name such as CloneVM_Task), descriptionId
// "VirtualMachine.clone" (vSphere API reference, TaskInfo). Clients read it while the
// task runs: pyVim's WaitForTask looks the method up to check for a pending question.
func nameTask(task *simulator.Task, obj mo.Reference, method string) {
	kind := obj.Reference().Type
	wsdl := map[string]string{
		"clone": "CloneVM_Task", "reconfigure": "ReconfigVM_Task", "powerOn": "PowerOnVM_Task",
		"enterMaintenanceMode": "EnterMaintenanceMode_Task", "exitMaintenanceMode": "ExitMaintenanceMode_Task",
	}[method]
	simulator.Map.Update(task, []types.PropertyChange{
		{Name: "info.name", Val: wsdl},
		{Name: "info.descriptionId", Val: kind + "." + method},
	})
}

// finishTaskWith ends a task with its result, or its fault and a readable message.
func finishTaskWith(task *simulator.Task, result types.AnyType, fault types.BaseMethodFault) {
	changes := []types.PropertyChange{{Name: "info.completeTime", Val: time.Now()}}
	if fault == nil {
		changes = append(changes,
			types.PropertyChange{Name: "info.progress", Val: int32(100)},
			types.PropertyChange{Name: "info.result", Val: result},
			types.PropertyChange{Name: "info.state", Val: types.TaskInfoStateSuccess})
	} else {
		changes = append(changes,
			types.PropertyChange{Name: "info.state", Val: types.TaskInfoStateError},
			types.PropertyChange{Name: "info.error", Val: types.LocalizedMethodFault{
				Fault: fault, LocalizedMessage: faultMessage(fault)}})
	}
	simulator.Map.WithLock(task, func() { simulator.Map.Update(task, changes) })
}

// faultMessage is a readable message for a fault raised inside a timed task.
func faultMessage(fault types.BaseMethodFault) string {
	if f := fault.GetMethodFault(); f != nil && f.FaultMessage != nil && len(f.FaultMessage) > 0 {
		return f.FaultMessage[0].Message
	}
	switch f := fault.(type) {
	case *types.SystemError:
		return f.Reason
	case *types.InvalidHostState:
		return "The operation is not allowed in the current state of the host"
	case *types.DuplicateName:
		return fmt.Sprintf("The name '%s' already exists.", f.Name)
	case *types.InvalidDatastore:
		return fmt.Sprintf("The datastore '%s' is not accessible from the host.", f.Name)
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", fault), "*types.")
}

// reconfigureDone holds, per VM (moid), what must happen once its next ReconfigVM_Task has
// applied its change: the device-group bookkeeping (devicegroup_config.go) reads the
// devices the change added, which exist only at the task's end.
var reconfigureDone sync.Map // moid -> func()

// reconfigureTask is ReconfigVM_Task taking its modelled time; the change lands at the end.
func reconfigureTask(vm *simulator.VirtualMachine, spec types.VirtualMachineConfigSpec) types.ManagedObjectReference {
	done, _ := reconfigureDone.LoadAndDelete(vm.Self.Value) // this task's, claimed when it starts
	return timedTask(vm, "reconfigure", reconfigureS, nil, func() (types.AnyType, types.BaseMethodFault) {
		fault := waitFault(object.NewVirtualMachine(site, vm.Self).Reconfigure(context.Background(), spec))
		if f, ok := done.(func()); ok && fault == nil {
			f()
		}
		return nil, fault
	})
}

// powerOnTask is PowerOnVM_Task taking its modelled time; ESXi's power-on checks
// (poweron.go) run when it is admitted and again at the end, when the device is claimed.
func powerOnTask(vm *simulator.VirtualMachine) types.ManagedObjectReference {
	return timedTask(vm, "powerOn", powerOnS, nil, func() (types.AnyType, types.BaseMethodFault) {
		var fault types.BaseMethodFault
		simulator.Map.WithLock(vm, func() { fault, _ = powerOnFault(vm) })
		if fault != nil {
			return nil, fault
		}
		if f := waitFault(object.NewVirtualMachine(site, vm.Self).PowerOn(context.Background())); f != nil {
			return nil, f
		}
		markBooting(vm)
		return nil, nil
	})
}

// booting holds when each VM's guest will have booted far enough for its Tools
// to run (power-on plus guestBootS); Tools reports before then wait (tools.go).
var booting sync.Map // moid -> time.Time

func markBooting(vm *simulator.VirtualMachine) {
	booting.Store(vm.Self.Value, time.Now().Add(modelled(guestBootS)))
}

// bootWait is how long a guest still needs before its Tools can run (0: running).
func bootWait(vm *simulator.VirtualMachine) time.Duration {
	if v, ok := booting.Load(vm.Self.Value); ok {
		if left := time.Until(v.(time.Time)); left > 0 {
			return left
		}
	}
	return 0
}
