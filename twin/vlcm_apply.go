package main

// vLCM's apply (com.vmware.esx.settings.clusters.Software.apply$task, POST
// /api/esx/settings/clusters/{cluster}/software?action=apply&vmw-task=true): the hosts of
// ApplySpec.hosts (all where unset) remediated one after another to the latest commit, as
// vlcm.go's header says (VMware vSphere Lifecycle Manager documentation, "Remediating a Cluster
// Against a Single Image"; ApplySpec, ApplyResult, ApplyStatus).

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// applyTask is clusters.software apply$task.
func applyTask(c *vapiCall) (interface{}, *vapiErr) {
	vlcm.Lock()
	defer vlcm.Unlock()
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	_, spec := unStruct(c.In["spec"])
	all := clusterHosts(ci)
	var hosts []*simulator.HostSystem
	if want := inStrings(spec["hosts"]); len(want) > 0 {
		for _, id := range want {
			var found *simulator.HostSystem
			for _, hs := range all {
				if hs.Self.Value == id {
					found = hs
				}
			}
			if found == nil {
				return nil, verr("invalid_argument", "Host %s is not in cluster %s.", id, ci.ref.Value)
			}
			hosts = append(hosts, found)
		}
	} else {
		hosts = all
	}
	if ci.applying {
		return nil, verr("not_allowed_in_current_state", "Another remediation is in progress on cluster %s.", ci.ref.Value)
	}
	ci.applying = true
	commit := ci.latest()
	return startVapiTask(c, ci.ref, "Remediate cluster", 0, func(t *vapiTask) (interface{}, *vapiErr) {
		defer func() { vlcm.Lock(); ci.applying = false; vlcm.Unlock() }()
		return remediate(ci, commit, hosts, all, t)
	}), nil
}

// remediate brings each host to the commit's image, one host after another.
func remediate(ci *clusterImage, commit *vlcmCommit, hosts, all []*simulator.HostSystem, t *vapiTask) (interface{}, *vapiErr) {
	start := time.Now()
	status := map[string]interface{}{}
	var ok, failed, skipped, reasons []string
	for i, hs := range hosts {
		hostStart := time.Now()
		state, note := remediateHost(hs, commit.Image)
		switch state {
		case "OK":
			ok = append(ok, hs.Self.Value)
		case "SKIPPED":
			skipped = append(skipped, hs.Self.Value)
		default:
			failed = append(failed, hs.Self.Value)
			reasons = append(reasons, note)
		}
		notes := notifications()
		if note != "" {
			kind := "info"
			if state == "ERROR" {
				kind = "errors"
			}
			notes = notificationsWith(kind, "com.vmware.vcIntegrity.lifecycle.Remediation", note)
		}
		status[hs.Self.Value] = applyStatus(state, hostStart, notes)
		t.setProgress((i + 1) * 100 / len(hosts))
	}
	vlcm.Lock()
	defer vlcm.Unlock()
	if len(failed) > 0 {
		return nil, verr("error", "Remediation of %d host(s) failed: %s", len(failed), strings.Join(reasons, "; "))
	}
	applied := true
	for _, hs := range all {
		if s, _ := hostCompliance(hs, commit.Image, commit.ID, time.Now()); s != "COMPLIANT" {
			applied = false
		}
	}
	commit.Applied = applied
	return st("com.vmware.esx.settings.clusters.software.apply_result", obj{
		"status": opt(applyStatus("OK", start, notifications())), "commit": commit.ID,
		"host_info": hostInfoMap(hosts), "host_status": vmap(status), "successful_hosts": vset(ok),
		"failed_hosts": vset(failed), "skipped_hosts": vset(skipped), "notifications": opt(notifications())}), nil
}

// applyStatus is an ApplyStatus; its progress is a union case of its status (set for RUNNING,
// RETRY_PENDING, OK, ERROR; unset for SKIPPED and TIMED_OUT).
func applyStatus(state string, start time.Time, notes obj) obj {
	progress := opt(nil)
	if state != "SKIPPED" && state != "TIMED_OUT" {
		progress = opt(st("com.vmware.cis.task.progress", obj{"total": 100, "completed": 100,
			"message": message("com.vmware.vcIntegrity.lifecycle.Remediation", "Remediation "+strings.ToLower(state))}))
	}
	return st("com.vmware.esx.settings.clusters.software.apply_status", obj{"status": state,
		"progress": progress, "start_time": vtime(start), "end_time": vtime(time.Now()), "notifications": notes})
}

// remediateHost: OK, SKIPPED (already compliant) or ERROR, with a note.
func remediateHost(hs *simulator.HostSystem, target hostImage) (string, string) {
	vlcm.Lock()
	current := imageOf(hs)
	vlcm.Unlock()
	same := current.Base == target.Base && len(current.Components) == len(target.Components)
	for n, v := range target.Components {
		same = same && current.Components[n] == v
	}
	if same {
		return "SKIPPED", "Host " + hs.Name + " is compliant with the image."
	}
	var inMaintenance, connected bool
	var running []string
	simulator.Map.WithLock(hs, func() {
		connected = hs.Runtime.ConnectionState == types.HostSystemConnectionStateConnected
		inMaintenance = hs.Runtime.InMaintenanceMode
		for _, vm := range vmsOn(hs) {
			if !isAgent(vm) && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
				running = append(running, vm.Name)
			}
		}
	})
	if !connected || availability.unavailable(hs.Self, nil) != "" {
		return "ERROR", "Host " + hs.Name + " is not responding."
	}
	enteredByVlcm := false
	if !inMaintenance {
		if len(running) > 0 {
			sort.Strings(running)
			return "ERROR", fmt.Sprintf("Host %s cannot enter maintenance mode: powered-on VM(s) %s cannot be"+
				" migrated and the remediation policy does not change VM power states"+
				" (DO_NOT_CHANGE_VMS_POWER_STATE)", hs.Name, strings.Join(running, ", "))
		}
		if e := waitVimTask(enterMaintenance(hs, &types.EnterMaintenanceMode_Task{})); e != "" {
			return "ERROR", fmt.Sprintf("Host %s did not enter maintenance mode: %s", hs.Name, e)
		}
		enteredByVlcm = true
	}
	// Stage and install the image's payloads (modelled time), then reboot into it.
	time.Sleep(modelled(vlcmInstallS))
	vlcm.Lock()
	vibs := imageVIBs(hs, target)
	vlcm.Unlock()
	hostVIBs.Store(hs.Self.Value, vibs)
	simulator.Map.WithLock(hs, func() { hs.Summary.RebootRequired = true })
	startReboot(hs) // reboot.go
	for {
		time.Sleep(pollPause())
		up := false
		simulator.Map.WithLock(hs, func() {
			up = hs.Runtime.ConnectionState == types.HostSystemConnectionStateConnected && !hs.Summary.RebootRequired
		})
		if up && availability.unavailable(hs.Self, nil) == "" {
			break
		}
	}
	if enteredByVlcm {
		if e := waitVimTask(exitMaintenance(hs)); e != "" {
			return "ERROR", fmt.Sprintf("Host %s did not exit maintenance mode: %s", hs.Name, e)
		}
	}
	return "OK", "Host " + hs.Name + " remediated to the image of the cluster."
}

// waitVimTask waits for a vim task of the twin's own; "" on success, else its message.
func waitVimTask(ref types.ManagedObjectReference) string {
	for {
		task, ok := simulator.Map.Get(ref).(*simulator.Task)
		if !ok {
			return "task " + ref.Value + " is gone"
		}
		var state types.TaskInfoState
		var msg string
		simulator.Map.WithLock(task, func() {
			state = task.Info.State
			if task.Info.Error != nil {
				msg = task.Info.Error.LocalizedMessage
			}
		})
		switch state {
		case types.TaskInfoStateSuccess:
			return ""
		case types.TaskInfoStateError:
			return orDefault(msg, "failed")
		}
		time.Sleep(pollPause())
	}
}

// pollPause is how often the twin looks at its own state while it waits: a modelled second, at
// least a millisecond.
func pollPause() time.Duration {
	if d := modelled(1); d > time.Millisecond {
		return d
	}
	return time.Millisecond
}
