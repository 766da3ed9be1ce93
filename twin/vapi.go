package main

// vCenter's Automation API as vAPI JSON-RPC at /api: what Broadcom's vSphere Automation SDK for
// Python speaks (vmware.vapi.vsphere.client.JSON_RPC_ENDPOINT = '/api'; vCenter Server 7.0 U2 and
// later serve the Automation API under /api). The wire format is that of vmware-vapi-runtime's
// vmware/vapi/data/serializers/jsonrpc.py: a JSON-RPC 2.0 "invoke" whose params name serviceId,
// operationId, the input structure and a context (appCtx, securityCtx); values are wrapped by
// kind ({"STRUCTURE": {name: {fields}}}, {"OPTIONAL": v}, {"ERROR": {name: {fields}}},
// {"SECRET": s}); a map is a list of "map-entry" structures with key and value; a set a list;
// date-times are vAPI's "YYYY-MM-DDThh:mm:ss.sssZ". The result is {"output": v} or
// {"error": ERROR} (com.vmware.vapi.std.errors.*), with HTTP 200 either way.
//
// Sessions (com.vmware.cis.session): create takes the user_pass security context
// (schemeId com.vmware.vapi.std.security.user_pass) and answers a session id; every other
// call carries it (schemeId com.vmware.vapi.std.security.session_id, or the
// vmware-api-session-id header REST clients send); without one: Unauthenticated.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// serveRESTSession is the REST form of session management vCenter 7.0 U2+ serves beside
// JSON-RPC (vSphere Automation API, "Create Session": POST /api/session with HTTP basic
// authentication answers 201 and the session id as a JSON string; GET /api/session the session's
// user; DELETE /api/session ends it, 204; the id travels in the vmware-api-session-id header).
// The sessions are the JSON-RPC ones.
func serveRESTSession(w http.ResponseWriter, r *http.Request) {
	unauthenticated := func() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(obj{"error_type": "UNAUTHENTICATED", "messages": []interface{}{
			obj{"id": "vapi.method.authentication.required", "default_message": "Authentication required.",
				"args": []interface{}{}}}})
	}
	id := r.Header.Get("vmware-api-session-id")
	switch r.Method {
	case http.MethodPost:
		user, pass, ok := r.BasicAuth()
		if !ok || user != vapiLogin.User || pass != vapiLogin.Password {
			unauthenticated()
			return
		}
		id = newID(16)
		vapiSessions.Lock()
		vapiSessions.byID[id] = user
		vapiSessions.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(id)
	case http.MethodGet, http.MethodDelete:
		vapiSessions.Lock()
		user, ok := vapiSessions.byID[id]
		if ok && r.Method == http.MethodDelete {
			delete(vapiSessions.byID, id)
		}
		vapiSessions.Unlock()
		if !ok || id == "" {
			unauthenticated()
			return
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		now := time.Now().UTC().Format(time.RFC3339)
		writeJSON(w, obj{"user": user, "created_time": now, "last_accessed_time": now})
	default:
		w.Header().Set("Allow", "POST, GET, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// vapiErr is a com.vmware.vapi.std.errors.<kind> error with its message.
type vapiErr struct {
	Kind string // not_found, invalid_argument, already_exists, unauthenticated, ...
	Msg  string
}

func verr(kind, format string, a ...interface{}) *vapiErr {
	return &vapiErr{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// vapiCall is one invocation: its input fields and who makes it.
type vapiCall struct {
	Service, Operation string
	In                 map[string]interface{}
	User               string
}

type vapiHandler func(c *vapiCall) (interface{}, *vapiErr)

// vapiOps: "<serviceId> <operationId>" -> handler (vlcm.go and the inventory below fill it).
var vapiOps = map[string]vapiHandler{}

// vapiSessions: session id -> user.
var vapiSessions = struct {
	sync.Mutex
	byID map[string]string
}{byID: map[string]string{}}

// vapiLogin holds the user and password the twin accepts (the SOAP login's).
var vapiLogin struct{ User, Password string }

// serveVapi answers POST /api.
func serveVapi(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "vAPI JSON-RPC takes POST", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		ID      json.RawMessage `json:"id"`
		Params  struct {
			ServiceID   string      `json:"serviceId"`
			OperationID string      `json:"operationId"`
			Input       interface{} `json:"input"`
			Ctx         struct {
				SecurityCtx map[string]interface{} `json:"securityCtx"`
			} `json:"ctx"`
		} `json:"params"`
	}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || req.JSONRPC != "2.0" || req.Method != "invoke" {
		// JSON-RPC 2.0: -32600 Invalid Request (parse errors included here).
		writeJSON(w, map[string]interface{}{"jsonrpc": "2.0", "id": nil,
			"error": map[string]interface{}{"code": -32600, "message": "Invalid Request"}})
		return
	}
	p := req.Params
	_, in := unStruct(p.Input)
	call := &vapiCall{Service: p.ServiceID, Operation: p.OperationID, In: in}
	out, fault := dispatchVapi(call, p.Ctx.SecurityCtx, r.Header.Get("vmware-api-session-id"))
	result := map[string]interface{}{}
	if fault != nil {
		result["error"] = errorValue(fault)
	} else {
		result["output"] = out
	}
	writeJSON(w, map[string]interface{}{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

func dispatchVapi(c *vapiCall, sec map[string]interface{}, header string) (interface{}, *vapiErr) {
	scheme, _ := sec["schemeId"].(string)
	if c.Service == "com.vmware.cis.session" && c.Operation == "create" {
		user, _ := sec["userName"].(string)
		pass, _ := sec["password"].(string)
		if scheme != "com.vmware.vapi.std.security.user_pass" || user != vapiLogin.User || pass != vapiLogin.Password {
			return nil, verr("unauthenticated", "Authentication required.")
		}
		id := newID(16)
		vapiSessions.Lock()
		vapiSessions.byID[id] = user
		vapiSessions.Unlock()
		return map[string]interface{}{"SECRET": id}, nil
	}
	id := header
	if scheme == "com.vmware.vapi.std.security.session_id" {
		id, _ = sec["sessionId"].(string)
	}
	vapiSessions.Lock()
	user, ok := vapiSessions.byID[id]
	vapiSessions.Unlock()
	if !ok || id == "" {
		return nil, verr("unauthenticated", "Authentication required.")
	}
	c.User = user
	if c.Service == "com.vmware.cis.session" {
		switch c.Operation {
		case "delete":
			vapiSessions.Lock()
			delete(vapiSessions.byID, id)
			vapiSessions.Unlock()
			return nil, nil
		case "get":
			now := vtime(time.Now())
			return st("com.vmware.cis.session.info", obj{"user": user, "created_time": now,
				"last_accessed_time": now}), nil
		}
	}
	h, ok := vapiOps[c.Service+" "+c.Operation]
	if !ok {
		return nil, verr("operation_not_found", "Operation %s of service %s is not found.", c.Operation, c.Service)
	}
	return h(c)
}

func writeJSON(w http.ResponseWriter, v interface{}) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		log.Printf("rackcert-vcsim: vapi: %v", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// --- values on the wire ---

type obj = map[string]interface{}

// st is a structure value of the named vAPI type.
func st(name string, fields obj) obj { return obj{"STRUCTURE": obj{name: fields}} }

// opt is an optional value (nil: unset).
func opt(v interface{}) obj { return obj{"OPTIONAL": v} }

// vmap is a map value: a list of map-entry structures, in key order.
func vmap(m map[string]interface{}) []interface{} {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]interface{}, 0, len(keys))
	for _, k := range keys {
		out = append(out, st("map-entry", obj{"key": k, "value": m[k]}))
	}
	return out
}

// vset is a set of strings: a list, in order.
func vset(items []string) []interface{} {
	s := append([]string(nil), items...)
	sort.Strings(s)
	out := make([]interface{}, 0, len(s))
	for _, v := range s {
		out = append(out, v)
	}
	return out
}

// vtime is vAPI's date-time form.
func vtime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// message is a com.vmware.vapi.std.localizable_message.
func message(id, text string) obj {
	return st("com.vmware.vapi.std.localizable_message", obj{"id": id, "default_message": text,
		"args": []interface{}{}, "params": opt(nil), "localized": opt(nil)})
}

// errorValue is the ERROR value of a vapiErr: messages, data, error_type (vAPI std errors).
func errorValue(e *vapiErr) obj {
	return obj{"ERROR": obj{"com.vmware.vapi.std.errors." + e.Kind: obj{
		"messages":   []interface{}{message("com.vmware.vapi.std.errors."+e.Kind, e.Msg)},
		"data":       opt(nil),
		"error_type": opt(strings.ToUpper(e.Kind)),
	}}}
}

// unStruct unwraps a STRUCTURE (or ERROR) value: its type name and fields.
func unStruct(v interface{}) (string, map[string]interface{}) {
	v = unOpt(v)
	m, ok := v.(map[string]interface{})
	if !ok {
		return "", map[string]interface{}{}
	}
	for _, kind := range []string{"STRUCTURE", "ERROR"} {
		if inner, ok := m[kind].(map[string]interface{}); ok {
			for name, fields := range inner {
				f, _ := fields.(map[string]interface{})
				if f == nil {
					f = map[string]interface{}{}
				}
				return name, f
			}
		}
	}
	return "", map[string]interface{}{}
}

// unOpt unwraps an OPTIONAL value (nil when unset) or a SECRET; other values are as sent.
func unOpt(v interface{}) interface{} {
	if m, ok := v.(map[string]interface{}); ok && len(m) == 1 {
		if inner, ok := m["OPTIONAL"]; ok {
			return unOpt(inner)
		}
		if inner, ok := m["SECRET"]; ok {
			return inner
		}
	}
	return v
}

func inStr(v interface{}) string {
	s, _ := unOpt(v).(string)
	return s
}

func inBool(v interface{}) (bool, bool) {
	b, ok := unOpt(v).(bool)
	return b, ok
}

func inList(v interface{}) []interface{} {
	l, _ := unOpt(v).([]interface{})
	return l
}

func inStrings(v interface{}) []string {
	var out []string
	for _, item := range inList(v) {
		if s, ok := unOpt(item).(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// inMap reads a map value (map-entry structures) as key -> value (values still wrapped).
func inMap(v interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for _, item := range inList(v) {
		_, entry := unStruct(item)
		if k, ok := unOpt(entry["key"]).(string); ok {
			out[k] = entry["value"]
		}
	}
	return out
}
