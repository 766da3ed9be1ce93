package main

// Sessions expire after vCenter's idle timeout.
//
// vSphere Web Services SDK Programming Guide, "Session management": a session
// that is not used for the server's idle timeout (vCenter 7.0: 30 minutes,
// sessionIdleS in clock.go) ends, and every later call with its cookie faults
// NotAuthenticated until the client logs in again (a new session, a new
// cookie). govmomi 0.24's own SessionIdleTimeout ties its watch to the login
// request's context and still answers property reads without a session, where
// vCenter refuses them too; so the twin keeps its own book, by cookie.

import (
	"net/http"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
)

// sessionIdleFloor keeps a scaled-down test twin from logging out sessions that a
// test holds across its own slow steps (1/800 of 30 minutes is 2.25 s); a test
// that wants expiry sets clock.session_idle_ms.
const sessionIdleFloor = 10 * time.Minute

var sessionIdle time.Duration

func setSessionIdle() {
	sessionIdle = modelled(sessionIdleS)
	if sessionIdle < sessionIdleFloor {
		sessionIdle = sessionIdleFloor
	}
	if clockDesc.SessionIdleMs > 0 {
		sessionIdle = time.Duration(clockDesc.SessionIdleMs) * time.Millisecond
	}
}

type sessionBook struct {
	mu       sync.Mutex
	lastSeen map[string]time.Time
	expired  map[string]bool
}

var sessions = &sessionBook{lastSeen: map[string]time.Time{}, expired: map[string]bool{}}

// loginCalls need no session (they make one, or read what login needs).
var loginCalls = map[string]bool{
	"RetrieveServiceContent": true, "Login": true, "LoginByToken": true,
	"LoginExtensionByCertificate": true, "CloneSession": true,
}

// expire answers NotAuthenticated for a call on a session idle past the timeout
// (or already ended that way) and returns true; else it notes the call and returns false.
func (b *sessionBook) expire(w http.ResponseWriter, r *http.Request, method string) bool {
	cookie, err := r.Cookie(soap.SessionCookieName)
	if err != nil {
		return false
	}
	if loginCalls[method] {
		b.mu.Lock()
		dead := b.expired[cookie.Value]
		b.mu.Unlock()
		if dead { // the ended session is gone: the login makes a new one, as on vCenter
			r.Header.Del("Cookie")
		}
		return false
	}
	b.mu.Lock()
	now := time.Now()
	key := cookie.Value
	last, seen := b.lastSeen[key]
	if seen && now.Sub(last) > sessionIdle {
		b.expired[key] = true
		delete(b.lastSeen, key)
	}
	dead := b.expired[key]
	if !dead {
		b.lastSeen[key] = now
	}
	b.mu.Unlock()
	if dead {
		writeNotAuthenticated(w)
	}
	return dead
}

// writeNotAuthenticated is vCenter's answer to a call on an ended session
// (NotAuthenticated; pyVmomi raises vim.fault.NotAuthenticated).
func writeNotAuthenticated(w http.ResponseWriter) {
	writeSoapFault(w, "NotAuthenticated", "The session is not authenticated.")
}
