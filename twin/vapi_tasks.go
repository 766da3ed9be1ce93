package main

// Automation API tasks (com.vmware.cis.tasks): an operation named "<op>$task" answers a task id
// at once and runs on; `tasks get` reads its com.vmware.cis.task.info: status PENDING, RUNNING
// (progress total/completed), SUCCEEDED with its result (opaque: the operation's output value)
// or FAILED with its error; start_time and end_time. The SDK's
// vmware.vapi.stdlib.client.task.Task polls it this way.

import (
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

type vapiTask struct {
	mu                 sync.Mutex
	ID, User           string
	Service, Operation string
	Description        string
	Target             types.ManagedObjectReference
	Status             string
	Completed          int
	Start, End         time.Time
	Result             interface{}
	Err                *vapiErr
}

var vapiTasks sync.Map // id -> *vapiTask

func (t *vapiTask) setProgress(p int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p > t.Completed {
		t.Completed = p
	}
}

// startVapiTask runs `work` after `seconds` of modelled time (progress climbing meanwhile)
// and answers the task id. Call with vlcm held or not: work runs on its own goroutine.
func startVapiTask(c *vapiCall, target types.ManagedObjectReference, description string, seconds float64,
	work func(t *vapiTask) (interface{}, *vapiErr)) string {
	op := c.Operation
	if n := len(op); n > 5 && op[n-5:] == "$task" {
		op = op[:n-5]
	}
	t := &vapiTask{ID: newID(8) + ":" + c.Service, User: c.User, Service: c.Service, Operation: op,
		Description: description, Target: target, Status: "RUNNING", Start: time.Now()}
	vapiTasks.Store(t.ID, t)
	go func() {
		const steps = 10
		total := modelled(seconds)
		for i := 1; i <= steps && total > 0; i++ {
			time.Sleep(total / steps)
			t.setProgress(i * 90 / steps)
		}
		result, err := work(t)
		t.mu.Lock()
		defer t.mu.Unlock()
		t.End = time.Now()
		if err != nil {
			t.Status, t.Err = "FAILED", err
		} else {
			t.Status, t.Result, t.Completed = "SUCCEEDED", result, 100
		}
	}()
	return t.ID
}

func (t *vapiTask) info() obj {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := obj{
		"progress": opt(st("com.vmware.cis.task.progress", obj{"total": 100, "completed": t.Completed,
			"message": message("com.vmware.cis.task.progress", t.Description)})),
		"result":      opt(nil),
		"description": message("com.vmware.cis.task.description", t.Description),
		"service":     t.Service, "operation": t.Operation, "parent": opt(nil),
		"target": opt(st("com.vmware.vapi.std.dynamic_ID", obj{"type": t.Target.Type, "id": t.Target.Value})),
		"status": t.Status, "cancelable": false, "error": opt(nil),
		"start_time": opt(vtime(t.Start)), "end_time": opt(nil), "user": opt(t.User),
	}
	if !t.End.IsZero() {
		f["end_time"] = opt(vtime(t.End))
	}
	if t.Status == "SUCCEEDED" {
		f["result"] = opt(t.Result)
	}
	if t.Err != nil {
		f["error"] = opt(errorValue(t.Err))
	}
	return st("com.vmware.cis.task.info", f)
}

func init() {
	vapiOps["com.vmware.cis.tasks get"] = func(c *vapiCall) (interface{}, *vapiErr) {
		v, ok := vapiTasks.Load(inStr(c.In["task"]))
		if !ok {
			return nil, verr("not_found", "There is no task %s.", inStr(c.In["task"]))
		}
		return v.(*vapiTask).info(), nil
	}
}
