package main

// vCenter's limits on simultaneous provisioning operations.
//
// vCenter Server and Host Management, "Limits on Simultaneous Migrations":
// "Each operation, such as a migration with vMotion or cloning a virtual
// machine, is assigned a resource cost. Each host, datastore, or network
// resource, has a maximum cost that it can support at any one time. Any new
// migration or provisioning operation that causes a resource to exceed its
// maximum cost does not proceed immediately, but is queued until other
// operations complete and release resources."
//   - Host: maximum cost 8 per host; "other provisioning operations such as
//     cloning, deployment, and cold migration" cost 1 (derived limit 8).
//   - Datastore: maximum cost 128 per datastore; a Storage vMotion costs 16 on
//     the source and the target datastore. A full clone copies the template's
//     disks as Storage vMotion copies a VM's, so the twin charges a clone the same
//     16 on the datastore it writes (8 clones at once per datastore): the stricter
//     reading, as the twin must be where vCenter may be.
// A clone charges both the template's host (it reads the disks) and the host it
// is placed on. Queued tasks show TaskInfo state `queued` (clock.go).

import (
	"sync"
)

const (
	hostMaxCost      = 8
	hostCloneCost    = 1
	datastoreMaxCost = 128
	datastoreClone   = 16
)

// cost is what one operation takes of one resource ("host:<moid>", "datastore:<name>").
type cost struct {
	resource string
	amount   int
	max      int
}

type limitBook struct {
	mu    sync.Mutex
	cond  *sync.Cond
	inUse map[string]int
}

var limits = newLimitBook()

func newLimitBook() *limitBook {
	b := &limitBook{inUse: map[string]int{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire blocks until every cost fits under its maximum, takes them all at once
// (no partial holds, so two operations never deadlock), and returns the release.
func (b *limitBook) acquire(costs []cost) func() {
	if len(costs) == 0 {
		return func() {}
	}
	b.mu.Lock()
	for !b.fits(costs) {
		b.cond.Wait()
	}
	for _, c := range costs {
		b.inUse[c.resource] += c.amount
	}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		for _, c := range costs {
			b.inUse[c.resource] -= c.amount
		}
		b.mu.Unlock()
		b.cond.Broadcast()
	}
}

func (b *limitBook) fits(costs []cost) bool {
	for _, c := range costs {
		if b.inUse[c.resource]+c.amount > c.max {
			return false
		}
	}
	return true
}

// provisioningOn is how many provisioning operations hold the host now (maintenance.go:
// EnterMaintenanceMode_Task "does not complete until there are ... no provisioning
// operations in progress").
func (b *limitBook) provisioningOn(hostMoid string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse["host:"+hostMoid]
}

// cloneCosts: the template's host and the target host (1 of 8 each), the target datastore (16 of 128).
func cloneCosts(sourceHost, targetHost, datastore string) []cost {
	out := []cost{{resource: "host:" + targetHost, amount: hostCloneCost, max: hostMaxCost}}
	if sourceHost != "" && sourceHost != targetHost {
		out = append(out, cost{resource: "host:" + sourceHost, amount: hostCloneCost, max: hostMaxCost})
	}
	if datastore != "" {
		out = append(out, cost{resource: "datastore:" + datastore, amount: datastoreClone, max: datastoreMaxCost})
	}
	return out
}
