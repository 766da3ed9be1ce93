package main

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// esxcli over the vSphere API, as ESXi serves it through vCenter (the path of
// VMware's own esxcli with --vihost, and of `govc host.esxcli`):
//
//  1. HostSystem.RetrieveDynamicTypeManager() gives the host's
//     vmodl.reflect.DynamicTypeManager (WSDL InternalDynamicTypeManager);
//     DynamicTypeMgrQueryMoInstances lists the esxcli managed objects and
//     DynamicTypeMgrQueryTypeInfo their type definitions (esxcli_model.go).
//  2. HostSystem.RetrieveManagedMethodExecuter() gives the host's
//     vmodl.reflect.ManagedMethodExecuter; its ExecuteSoap(moid, version,
//     method, argument[]) calls a method of one of those objects, each argument
//     a SOAP snippet (<option>atsSupport</option>), and answers a SoapResult:
//     `response`, the result as a SOAP snippet (<obj xsi:type=...>), or
//     `fault` (faultMsg, faultDetail: the fault as a snippet).
//     vim.CLIInfo.FetchCLIInfo on ha-dynamic-type-manager-local-cli-cliinfo
//     answers a command's command-line description; vim.EsxCLI.<ns>.<app>.<cmd>
//     runs the command (esxcli_commands.go).
//
// Wire shapes: the vmodl.reflect types in VMware's esxcli package
// (pyVmomi/_typeinfo_reflect.py: DynamicTypeManager, ManagedMethodExecuter,
// SoapArgument, SoapResult, SoapFault) and the responses govmomi keeps from a
// real host (cli/esx/fixtures). Faults: an esxcli error is a
// vim.EsxCLI.CLIFault with its lines in errMsg; an unknown moid is
// ManagedObjectNotFound, an unknown method MethodNotFound, an unknown or
// missing argument InvalidRequest (vmodl.fault, vSphere API reference). These
// methods are internal to the API (govmomi keeps their types in its internal
// package), so the twin declares them itself.

// RetrieveManagedMethodExecuterRequest is HostSystem.RetrieveManagedMethodExecuter.
type RetrieveManagedMethodExecuterRequest struct {
	This types.ManagedObjectReference `xml:"_this"`
}

// RetrieveDynamicTypeManagerRequest is HostSystem.RetrieveDynamicTypeManager.
type RetrieveDynamicTypeManagerRequest struct {
	This types.ManagedObjectReference `xml:"_this"`
}

// DynTypeFilterSpec is DynamicTypeMgrTypeFilterSpec / DynamicTypeMgrMoFilterSpec (typeSubstr, id).
type DynTypeFilterSpec struct {
	TypeSubstr string `xml:"typeSubstr,omitempty"`
	ID         string `xml:"id,omitempty"`
}

// QueryTypeInfoRequest is DynamicTypeManager.DynamicTypeMgrQueryTypeInfo.
type QueryTypeInfoRequest struct {
	This       types.ManagedObjectReference `xml:"_this"`
	FilterSpec *DynTypeFilterSpec           `xml:"filterSpec,omitempty"`
}

// QueryMoInstancesRequest is DynamicTypeManager.DynamicTypeMgrQueryMoInstances.
type QueryMoInstancesRequest struct {
	This       types.ManagedObjectReference `xml:"_this"`
	FilterSpec *DynTypeFilterSpec           `xml:"filterSpec,omitempty"`
}

// ExecuteSoapRequest is ReflectManagedMethodExecuter.ExecuteSoap.
type ExecuteSoapRequest struct {
	This     types.ManagedObjectReference `xml:"_this"`
	Moid     string                       `xml:"moid"`
	Version  string                       `xml:"version"`
	Method   string                       `xml:"method"`
	Argument []SoapArgument               `xml:"argument,omitempty"`
}

// SoapArgument is ReflectManagedMethodExecuterSoapArgument: val is the argument as XML (<option>atsSupport</option>).
type SoapArgument struct {
	Name string `xml:"name"`
	Val  string `xml:"val"`
}

func init() {
	for name, v := range map[string]interface{}{
		"RetrieveManagedMethodExecuter":  (*RetrieveManagedMethodExecuterRequest)(nil),
		"RetrieveDynamicTypeManager":     (*RetrieveDynamicTypeManagerRequest)(nil),
		"DynamicTypeMgrQueryTypeInfo":    (*QueryTypeInfoRequest)(nil),
		"DynamicTypeMgrQueryMoInstances": (*QueryMoInstancesRequest)(nil),
		"ExecuteSoap":                    (*ExecuteSoapRequest)(nil),
	} {
		types.Add(name, reflect.TypeOf(v).Elem())
	}
}

const (
	executerPrefix = "managedMethodExecuter-"
	typeMgrPrefix  = "dynamicTypeManager-"
)

// noEsxcli lists the hosts that do not answer esxcli (HostDesc.NoEsxcli; host moid -> true).
var noEsxcli sync.Map

// atsRuntime is the ATS value each host booted with (host moid -> bool): esxcli's Runtime column.
var atsRuntime sync.Map

// bootATS records the value a boot runs with (at build and at every reboot).
func bootATS(hs *simulator.HostSystem, options *HostOptions) {
	if opt := options.find(atsOption); opt != nil {
		atsRuntime.Store(hs.Self.Value, truthy(opt.Value))
	}
}

func truthy(v interface{}) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true") || x == "1"
	}
	return false
}

func upperBool(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// esxcliHost is the host a HostSystem call names, or a fault written.
func esxcliHost(w http.ResponseWriter, this types.ManagedObjectReference) *simulator.HostSystem {
	hs, ok := simulator.Map.Get(this).(*simulator.HostSystem)
	if !ok {
		writeSoapFault(w, "ManagedObjectNotFound", fmt.Sprintf("no host %s", this.Value))
		return nil
	}
	if _, off := noEsxcli.Load(hs.Self.Value); off {
		writeSoapFault(w, "NotSupported", fmt.Sprintf("host %s does not answer esxcli", hs.Name))
		return nil
	}
	return hs
}

// hostOf is the host behind an executer or type manager moid (prefix + host moid).
func hostOf(this types.ManagedObjectReference, prefix string) *simulator.HostSystem {
	if !strings.HasPrefix(this.Value, prefix) {
		return nil
	}
	return hostByMoid(strings.TrimPrefix(this.Value, prefix))
}

// answerEsxcli answers the esxcli calls; false: not one of them.
func answerEsxcli(w http.ResponseWriter, method *simulator.Method) bool {
	switch req := method.Body.(type) {
	case *RetrieveManagedMethodExecuterRequest:
		if hs := esxcliHost(w, req.This); hs != nil {
			writeRaw(w, "RetrieveManagedMethodExecuter", `<returnval type="ReflectManagedMethodExecuter">`+
				executerPrefix+hs.Self.Value+`</returnval>`)
		}
		return true
	case *RetrieveDynamicTypeManagerRequest:
		if hs := esxcliHost(w, req.This); hs != nil {
			writeRaw(w, "RetrieveDynamicTypeManager", `<returnval type="InternalDynamicTypeManager">`+
				typeMgrPrefix+hs.Self.Value+`</returnval>`)
		}
		return true
	case *QueryTypeInfoRequest:
		if hostOf(req.This, typeMgrPrefix) == nil {
			writeSoapFault(w, "ManagedObjectNotFound", fmt.Sprintf("no type manager %s", req.This.Value))
			return true
		}
		substr := ""
		if req.FilterSpec != nil {
			substr = req.FilterSpec.TypeSubstr
		}
		out, err := xml.Marshal(queryTypeInfo(substr))
		if err != nil {
			writeSoapFault(w, "SystemError", err.Error())
			return true
		}
		writeRaw(w, "DynamicTypeMgrQueryTypeInfo", string(out))
		return true
	case *QueryMoInstancesRequest:
		if hostOf(req.This, typeMgrPrefix) == nil {
			writeSoapFault(w, "ManagedObjectNotFound", fmt.Sprintf("no type manager %s", req.This.Value))
			return true
		}
		writeRaw(w, "DynamicTypeMgrQueryMoInstances", moInstances(req.FilterSpec))
		return true
	case *ExecuteSoapRequest:
		hs := hostOf(req.This, executerPrefix)
		if hs == nil {
			writeSoapFault(w, "ManagedObjectNotFound", fmt.Sprintf("no executer %s", req.This.Value))
			return true
		}
		writeRaw(w, "ExecuteSoap", soapResult(executeSoap(hs, req)))
		return true
	}
	return false
}

// moInstances lists the CLI info object and one instance per app (MoFilterSpec: id, typeSubstr).
func moInstances(spec *DynTypeFilterSpec) string {
	var b strings.Builder
	add := func(id, moType string) {
		if spec != nil && ((spec.ID != "" && spec.ID != id) || !strings.Contains(moType, spec.TypeSubstr)) {
			return
		}
		fmt.Fprintf(&b, "<returnval><id>%s</id><moType>%s</moType></returnval>", id, moType)
	}
	add(cliInfoMoid, cliInfoType)
	for i := range esxcliApps {
		add(esxcliApps[i].moid(), esxcliApps[i].moType())
	}
	return b.String()
}

// soapObj wraps a result snippet as ESXi writes it: <obj xsi:type=...>.
func soapObj(xsiType, inner string) string {
	return `<obj xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"` +
		` xmlns="urn:vim25" versionId="5.0" xsi:type="` + xsiType + `">` + inner + `</obj>`
}

func escapeText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// soapResult is the ReflectManagedMethodExecuterSoapResult: response, or fault (faultMsg, faultDetail).
func soapResult(response string, fault *cliFault) string {
	if fault == nil {
		return "<returnval><response>" + escapeText(response) + "</response></returnval>"
	}
	// faultDetail is the fault as a LocalizedMethodFault (fault, localizedMessage), the form
	// pyVmomi's Deserialize turns back into the fault it raises.
	kind, inner, msg := fault.Kind, "", strings.Join(fault.Msg, "; ")
	if kind == "" {
		kind, msg = cliFaultWsdl, "EsxCLI.CLIFault.summary"
		for _, m := range fault.Msg {
			inner += "<errMsg>" + escapeText(m) + "</errMsg>"
		}
	}
	detail := soapObj(kind, `<fault xsi:type="`+kind+`">`+inner+`</fault>`+
		"<localizedMessage>"+escapeText(msg)+"</localizedMessage>")
	return "<returnval><fault><faultMsg>" + escapeText(msg) + "</faultMsg><faultDetail>" +
		escapeText(detail) + "</faultDetail></fault></returnval>"
}

// parseArguments reads each SoapArgument's snippet (<name>value</name>, repeated for arrays).
func parseArguments(req *ExecuteSoapRequest) (cliArgs, error) {
	args := cliArgs{}
	for _, a := range req.Argument {
		var wrapper struct {
			Items []struct {
				XMLName xml.Name
				Value   string `xml:",chardata"`
			} `xml:",any"`
		}
		if err := xml.Unmarshal([]byte("<a>"+a.Val+"</a>"), &wrapper); err != nil {
			return nil, fmt.Errorf("argument %s: %v", a.Name, err)
		}
		if len(wrapper.Items) == 0 {
			args[a.Name] = append(args[a.Name], "")
		}
		for _, it := range wrapper.Items {
			args[a.Name] = append(args[a.Name], strings.TrimSpace(it.Value))
		}
	}
	return args, nil
}

// executeSoap runs one ExecuteSoap call: FetchCLIInfo or an esxcli command.
func executeSoap(hs *simulator.HostSystem, req *ExecuteSoapRequest) (string, *cliFault) {
	args, err := parseArguments(req)
	if err != nil {
		return "", &cliFault{Kind: "InvalidRequest", Msg: []string{err.Error()}}
	}
	dot := strings.LastIndexByte(req.Method, '.')
	if dot < 0 {
		return "", &cliFault{Kind: "MethodNotFound", Msg: []string{"no method " + req.Method}}
	}
	typeName, methodName := req.Method[:dot], req.Method[dot+1:]
	if req.Moid == cliInfoMoid {
		if typeName != cliInfoType {
			return "", &cliFault{Kind: "MethodNotFound", Msg: []string{fmt.Sprintf("%s has no method %s", cliInfoMoid, req.Method)}}
		}
		var name string
		switch strings.ToLower(methodName) {
		case "fetchcliinfo":
			name, _ = args.one("typeName")
		case "fetchcliinfofromdisplayname":
			display, _ := args.one("displayName")
			name = cliNamePrefix + strings.ReplaceAll(strings.TrimSpace(display), " ", ".")
		default:
			return "", &cliFault{Kind: "MethodNotFound", Msg: []string{"no method " + req.Method}}
		}
		info, ok := cliInfo(name)
		if !ok {
			return "", &cliFault{Kind: "NotFound", Msg: []string{"The object or item referred to could not be found: " + name}}
		}
		out, err := xml.Marshal(info)
		if err != nil {
			return "", &cliFault{Kind: "SystemError", Msg: []string{err.Error()}}
		}
		return strings.Replace(string(out), "<obj>", strings.TrimSuffix(soapObj("VimCLIInfoInfo", ""), "</obj>"), 1), nil
	}
	var app *cliApp
	for i := range esxcliApps {
		if esxcliApps[i].moid() == req.Moid {
			app = &esxcliApps[i]
		}
	}
	if app == nil {
		return "", &cliFault{Kind: "ManagedObjectNotFound", Msg: []string{"no esxcli object " + req.Moid}}
	}
	m := app.method(methodName)
	if typeName != app.moType() || m == nil {
		return "", &cliFault{Kind: "MethodNotFound", Msg: []string{fmt.Sprintf("%s has no method %s", req.Moid, req.Method)}}
	}
	for name := range args {
		known := false
		for _, p := range m.Params {
			known = known || p.Name == name
		}
		if !known {
			return "", &cliFault{Kind: "InvalidRequest", Msg: []string{fmt.Sprintf("unexpected argument %q of %s", name, req.Method)}}
		}
	}
	for _, p := range m.Params {
		if _, ok := args[p.Name]; p.Required && !ok {
			return "", &cliFault{Kind: "InvalidRequest", Msg: []string{fmt.Sprintf("missing argument %q of %s", p.Name, req.Method)}}
		}
	}
	// Not under the host's lock: set commands go through the managers' own calls, which take it.
	res, fault := m.Run(hs, args)
	if fault != nil {
		return "", fault
	}
	return renderResult(app, m, res), nil
}

// renderResult writes the result snippet: ArrayOfDataObject, one DataObject, or a simple value.
func renderResult(app *cliApp, m *cliMethod, res cliResult) string {
	if m.simpleResult() {
		return soapObj("xsd:"+orDefault(m.Result, "boolean"), escapeText(res.Simple))
	}
	_, wsdl := app.dataType(m, m.Result)
	fields := app.Types[m.Result]
	body := func(r cliRow) string {
		var b strings.Builder
		for _, f := range fields {
			for _, v := range r.values[f.Display] {
				fmt.Fprintf(&b, "<%s>%s</%s>", f.prop(), escapeText(v), f.prop())
			}
		}
		return b.String()
	}
	if !m.List {
		if len(res.Rows) == 0 {
			return soapObj(wsdl, "")
		}
		return soapObj(wsdl, body(res.Rows[0]))
	}
	var b strings.Builder
	for _, r := range res.Rows {
		b.WriteString(`<DataObject xsi:type="` + wsdl + `">` + body(r) + `</DataObject>`)
	}
	return soapObj("ArrayOfDataObject", b.String())
}

// writeRaw writes a SOAP response <METHODResponse> with `inner` as its content.
func writeRaw(w http.ResponseWriter, method, inner string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"`+
		` xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"`+
		` xmlns:xsd="http://www.w3.org/2001/XMLSchema"`+
		` xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`+
		`<soapenv:Body><%sResponse xmlns="urn:vim25">%s</%sResponse></soapenv:Body></soapenv:Envelope>`,
		method, inner, method)
}
