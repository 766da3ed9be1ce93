package main

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// PagingCollector is the PropertyCollector with two things vCenter does and
// the simulator of govmomi 0.24 does not:
//
//   - Pages. RetrieveOptions.maxObjects (vSphere API reference): "the maximum
//     number of ObjectContent data objects that should be returned in a single
//     result ... An unset value indicates that there is no maximum. In this
//     case PropertyCollector policy may still limit the number of objects";
//     the rest comes back through ContinueRetrievePropertiesEx(token) until a
//     result has no token, or is dropped with CancelRetrievePropertiesEx.
//     The twin's policy limit is the description's page_size.
//   - Keyed property paths. A path may select one element of an array of data
//     objects by its key (vSphere Web Services SDK Programming Guide, property
//     paths: `config.extraConfig["guestinfo.x"]`, `config.hardware.device[4000]`),
//     so a client asks for one advanced option per host without the whole
//     list. An absent key is reported in missingSet (InvalidProperty).
//
// The simulator makes one collector per session by reflection on the
// registered type, so PagingCollector embeds the collector by value and keeps
// its page state in package variables.
type PagingCollector struct {
	simulator.PropertyCollector
}

// pageLimit is the server-side page size (0: none).
var pageLimit int

var pages = struct {
	sync.Mutex
	next int
	rest map[string][]types.ObjectContent
}{rest: map[string][]types.ObjectContent{}}

func wrapPropertyCollector(ref types.ManagedObjectReference) {
	pc := &PagingCollector{}
	pc.Self = ref
	simulator.Map.Put(pc)
}

type keyedPath struct {
	path, base, key string
}

// parseKeyed splits `config.option["X"]` into base config.option and key X.
func parseKeyed(path string) (keyedPath, bool) {
	open := strings.Index(path, "[")
	if open < 0 || !strings.HasSuffix(path, "]") {
		return keyedPath{}, false
	}
	key := strings.Trim(path[open+1:len(path)-1], `"`)
	return keyedPath{path: path, base: path[:open], key: key}, true
}

// RetrievePropertiesEx answers keyed paths and pages the result.
func (pc *PagingCollector) RetrievePropertiesEx(ctx *simulator.Context, r *types.RetrievePropertiesEx) soap.HasFault {
	req := *r
	keyed := map[string][]keyedPath{} // by object type
	asked := map[string]map[string]bool{}
	req.SpecSet = nil
	for _, spec := range r.SpecSet {
		original := spec.PropSet
		spec.PropSet = nil
		for _, ps := range original {
			if asked[ps.Type] == nil {
				asked[ps.Type] = map[string]bool{}
			}
			var paths []string
			for _, p := range ps.PathSet {
				if p == deviceGroupsPath && ps.Type == "VirtualMachine" { // devicegroup_read.go
					asked[ps.Type][p] = true
					continue
				}
				if k, ok := parseKeyed(p); ok {
					keyed[ps.Type] = append(keyed[ps.Type], k)
					paths = append(paths, k.base)
				} else {
					asked[ps.Type][p] = true
					paths = append(paths, p)
				}
			}
			ps.PathSet = paths
			spec.PropSet = append(spec.PropSet, ps)
		}
		req.SpecSet = append(req.SpecSet, spec)
	}
	body := pc.PropertyCollector.RetrievePropertiesEx(ctx, &req).(*methods.RetrievePropertiesExBody)
	if body.Res == nil || body.Res.Returnval == nil {
		return body
	}
	objects := body.Res.Returnval.Objects
	for i := range objects {
		if k := keyed[objects[i].Obj.Type]; len(k) > 0 {
			objects[i] = selectKeyed(objects[i], k, asked[objects[i].Obj.Type])
		}
		if objects[i].Obj.Type == "VirtualMachine" {
			decorateGroups(&objects[i], asked["VirtualMachine"][deviceGroupsPath])
		}
	}
	limit := pageLimit
	if r.Options.MaxObjects > 0 && (limit == 0 || int(r.Options.MaxObjects) < limit) {
		limit = int(r.Options.MaxObjects)
	}
	body.Res.Returnval = page(objects, limit)
	return body
}

func page(objects []types.ObjectContent, limit int) *types.RetrieveResult {
	if limit <= 0 || len(objects) <= limit {
		return &types.RetrieveResult{Objects: objects}
	}
	pages.Lock()
	defer pages.Unlock()
	pages.next++
	token := fmt.Sprintf("page-%d", pages.next)
	pages.rest[token] = objects[limit:]
	return &types.RetrieveResult{Objects: objects[:limit], Token: token}
}

// ContinueRetrievePropertiesEx returns the next page for a token.
func (pc *PagingCollector) ContinueRetrievePropertiesEx(r *types.ContinueRetrievePropertiesEx) soap.HasFault {
	body := new(methods.ContinueRetrievePropertiesExBody)
	pages.Lock()
	rest, ok := pages.rest[r.Token]
	delete(pages.rest, r.Token)
	pages.Unlock()
	if !ok {
		body.Fault_ = simulator.Fault(fmt.Sprintf("unknown or finished token %q", r.Token),
			&types.InvalidArgument{InvalidProperty: "token"})
		return body
	}
	limit := pageLimit
	if limit <= 0 {
		limit = len(rest)
	}
	body.Res = &types.ContinueRetrievePropertiesExResponse{Returnval: *page(rest, limit)}
	return body
}

// CancelRetrievePropertiesEx drops the rest of a paged result.
func (pc *PagingCollector) CancelRetrievePropertiesEx(r *types.CancelRetrievePropertiesEx) soap.HasFault {
	pages.Lock()
	delete(pages.rest, r.Token)
	pages.Unlock()
	return &methods.CancelRetrievePropertiesExBody{Res: new(types.CancelRetrievePropertiesExResponse)}
}

// selectKeyed replaces the base arrays by the keyed elements asked for.
func selectKeyed(oc types.ObjectContent, keyed []keyedPath, asked map[string]bool) types.ObjectContent {
	bases := map[string]interface{}{}
	var props []types.DynamicProperty
	for _, p := range oc.PropSet {
		bases[p.Name] = p.Val
		if asked[p.Name] || !isKeyedBase(p.Name, keyed) {
			props = append(props, p)
		}
	}
	for _, k := range keyed {
		if elem, ok := findKeyed(bases[k.base], k.key); ok {
			props = append(props, types.DynamicProperty{Name: k.path, Val: elem})
			continue
		}
		oc.MissingSet = append(oc.MissingSet, types.MissingProperty{
			Path:  k.path,
			Fault: types.LocalizedMethodFault{Fault: &types.InvalidProperty{Name: k.path}},
		})
	}
	var missing []types.MissingProperty
	for _, m := range oc.MissingSet {
		if !isKeyedBase(m.Path, keyed) || asked[m.Path] {
			missing = append(missing, m)
		}
	}
	oc.MissingSet = missing
	oc.PropSet = props
	return oc
}

func isKeyedBase(name string, keyed []keyedPath) bool {
	for _, k := range keyed {
		if k.base == name {
			return true
		}
	}
	return false
}

// findKeyed finds the element of an ArrayOfX value whose Key equals key.
func findKeyed(array interface{}, key string) (interface{}, bool) {
	if array == nil {
		return nil, false
	}
	v := reflect.ValueOf(array)
	if v.Kind() == reflect.Ptr {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.NumField() != 1 || v.Field(0).Kind() != reflect.Slice {
		return nil, false
	}
	items := v.Field(0)
	for i := 0; i < items.Len(); i++ {
		item := items.Index(i)
		elem := item
		for elem.Kind() == reflect.Interface || elem.Kind() == reflect.Ptr {
			elem = elem.Elem()
		}
		if elem.Kind() != reflect.Struct {
			continue
		}
		f := elem.FieldByName("Key")
		if f.IsValid() && fmt.Sprint(f.Interface()) == key {
			return item.Interface(), true
		}
	}
	return nil, false
}

// FetchResponse and FetchBody are the answer to Fetch, the accessor pyVmomi
// uses to read one property of one object (`vm.snapshot`); the simulator's own
// types for it are in a package internal to it.
type FetchResponse struct {
	Returnval types.AnyType `xml:"returnval,omitempty,typeattr"`
}

type FetchBody struct {
	Res    *FetchResponse `xml:"FetchResponse,omitempty"`
	Fault_ *soap.Fault    `xml:"http://schemas.xmlsoap.org/soap/envelope/ Fault,omitempty"`
}

func (b *FetchBody) Fault() *soap.Fault { return b.Fault_ }

// Fetch answers an unset property the way vCenter does, with no value (the
// client sees None/null): "unset" is how the vSphere API reference marks an
// optional property with nothing in it (VirtualMachine.snapshot "if any",
// parentVApp, resourceConfig of a template, ...). The simulator's Fetch
// indexes an empty missingSet there and panics. Keyed paths go through this
// collector's RetrievePropertiesEx like any read. req is the simulator's
// internal Fetch type, read by reflection (This, Prop).
func (pc *PagingCollector) Fetch(ctx *simulator.Context, req interface{}) soap.HasFault {
	rv := reflect.ValueOf(req).Elem()
	this := rv.FieldByName("This").Interface().(types.ManagedObjectReference)
	prop := rv.FieldByName("Prop").String()
	body := &FetchBody{}
	known := simulator.Map.Get(this) != nil || (ctx.Session != nil && ctx.Session.Get(this) != nil)
	if this.Type == "ServiceInstance" || !known {
		// ServiceInstance.content and the super-type references ovftool sends: the simulator's own answer.
		out := reflect.ValueOf(&pc.PropertyCollector).MethodByName("Fetch").Call(
			[]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(req)})
		return out[0].Interface().(soap.HasFault)
	}
	res := pc.RetrievePropertiesEx(ctx, &types.RetrievePropertiesEx{
		SpecSet: []types.PropertyFilterSpec{{
			PropSet:   []types.PropertySpec{{Type: this.Type, PathSet: []string{prop}}},
			ObjectSet: []types.ObjectSpec{{Obj: this}},
		}},
	}).(*methods.RetrievePropertiesExBody)
	if res.Fault_ != nil {
		body.Fault_ = res.Fault_
		return body
	}
	body.Res = &FetchResponse{}
	if res.Res == nil || res.Res.Returnval == nil || len(res.Res.Returnval.Objects) == 0 {
		body.Res = nil
		body.Fault_ = simulator.Fault("The object has already been deleted or has not been completely created",
			&types.ManagedObjectNotFound{Obj: this})
		return body
	}
	oc := res.Res.Returnval.Objects[0]
	switch {
	case len(oc.PropSet) > 0:
		body.Res.Returnval = oc.PropSet[0].Val
	case len(oc.MissingSet) > 0:
		body.Res = nil
		body.Fault_ = simulator.Fault(oc.MissingSet[0].Fault.LocalizedMessage, oc.MissingSet[0].Fault.Fault)
	}
	return body
}
