package main

import (
	"encoding/xml"
	"strings"
	"unicode"
)

// The esxcli command model: one table (esxcliApps) from which the twin derives
// everything a client discovers before it runs a command, the way ESXi's hostd
// publishes its esxcli plug-ins:
//   - DynamicTypeMgrQueryMoInstances: one managed-object instance per esxcli
//     "app" (id ha-cli-handler-<namespace>-<app>, moType vim.EsxCLI.<ns>.<app>)
//     plus the CLI info object (id ha-dynamic-type-manager-local-cli-cliinfo,
//     moType vim.CLIInfo), the ids govc's esxcli executor and VMware's esxcli
//     address;
//   - DynamicTypeMgrQueryTypeInfo: the vmodl.reflect type definitions
//     (DynamicTypeMgrManagedTypeInfo with its methods, parameters, return type
//     and the vim.EsxCLI.CLIFault fault; DynamicTypeMgrDataTypeInfo for each
//     result structure), filtered by TypeFilterSpec.typeSubstr as a substring;
//   - vim.CLIInfo.FetchCLIInfo: the command-line face of each app (display
//     names, option aliases such as -o|--option, help, formatter hints).
// Shapes follow the vmodl.reflect types VMware's esxcli package ships
// (pyVmomi/_typeinfo_reflect.py) and govmomi's simulator/esx/type_info.go and
// command_info.go, which were dumped off a real ESXi host; the commands, their
// options and columns follow VMware's ESXCLI command reference for ESXi 7.0.3.

const (
	cliVersion    = "vim.version.version5" // the version ESXi's esxcli types carry (govmomi's dump)
	cliInfoMoid   = "ha-dynamic-type-manager-local-cli-cliinfo"
	cliInfoType   = "vim.CLIInfo"
	cliFaultType  = "vim.EsxCLI.CLIFault"
	cliFaultWsdl  = "VimEsxCLICLIFault"
	cliNamePrefix = "vim.EsxCLI."
)

// cliField is one column of a result structure: its display name (the property is the name without spaces).
type cliField struct {
	Display string
	Type    string // string (default), long, boolean, string[]
}

func (f cliField) prop() string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' {
			return r
		}
		return -1
	}, f.Display)
}

func (f cliField) vmodlType() string {
	if f.Type == "" {
		return "string"
	}
	return f.Type
}

// cliParam is one option of a command.
type cliParam struct {
	Name     string // the vmodl parameter name (the SOAP argument name)
	Display  string
	Aliases  []string
	Type     string // string, boolean, long, string[]
	Required bool
	Flag     bool // takes no value (a boolean switch)
	Help     string
}

// cliMethod is one command: its parameters and its result.
type cliMethod struct {
	Name   string
	Help   string
	Params []cliParam
	// Result: a structure name of the app's Types (array when List is true), or a simple type.
	Result    string
	List      bool
	Formatter string // "table", "simple" or "" (ESXi's formatter hint)
	Fields    string // the column order (hint fields:<Result>)
	Run       cliHandler
}

// cliApp is one esxcli namespace's leaf ("app"): `esxcli <Path with spaces> <method>`.
type cliApp struct {
	Path    string // e.g. system.settings.kernel
	Help    string
	Methods []cliMethod
	Types   map[string][]cliField // result structures, by short name (per method: <method>.<Type>)
}

func (a *cliApp) moType() string { return cliNamePrefix + a.Path }
func (a *cliApp) moid() string   { return "ha-cli-handler-" + strings.ReplaceAll(a.Path, ".", "-") }
func (a *cliApp) wsdl() string   { return "VimEsxCLI" + strings.ReplaceAll(a.Path, ".", "") }

func (a *cliApp) method(name string) *cliMethod {
	for i := range a.Methods {
		if strings.EqualFold(a.Methods[i].Name, name) {
			return &a.Methods[i]
		}
	}
	return nil
}

// dataType is the vmodl name and WSDL name of a method's result structure.
func (a *cliApp) dataType(m *cliMethod, short string) (string, string) {
	return a.moType() + "." + m.Name + "." + short, a.wsdl() + m.Name + short
}

func (m *cliMethod) simpleResult() bool {
	switch m.Result {
	case "boolean", "string", "long", "":
		return true
	}
	return false
}

// --- vmodl.reflect type info (DynamicTypeManager) ---

type tiAnnotation struct {
	Name string `xml:"name"`
}

type tiParam struct {
	Name       string         `xml:"name"`
	Version    string         `xml:"version"`
	Type       string         `xml:"type"`
	Annotation []tiAnnotation `xml:"annotation,omitempty"`
}

type tiMethod struct {
	Name           string    `xml:"name"`
	WsdlName       string    `xml:"wsdlName"`
	Version        string    `xml:"version"`
	ParamTypeInfo  []tiParam `xml:"paramTypeInfo,omitempty"`
	ReturnTypeInfo *tiParam  `xml:"returnTypeInfo,omitempty"`
	Fault          []string  `xml:"fault,omitempty"`
}

type tiManaged struct {
	Name     string     `xml:"name"`
	WsdlName string     `xml:"wsdlName"`
	Version  string     `xml:"version"`
	Base     []string   `xml:"base"`
	Method   []tiMethod `xml:"method,omitempty"`
}

type tiProperty struct {
	Name       string         `xml:"name"`
	Version    string         `xml:"version"`
	Type       string         `xml:"type"`
	Annotation []tiAnnotation `xml:"annotation,omitempty"`
}

type tiData struct {
	Name     string       `xml:"name"`
	WsdlName string       `xml:"wsdlName"`
	Version  string       `xml:"version"`
	Base     []string     `xml:"base"`
	Property []tiProperty `xml:"property,omitempty"`
}

// allTypeInfo is vmodl.reflect.DynamicTypeManager.AllTypeInfo.
type allTypeInfo struct {
	XMLName xml.Name    `xml:"returnval"`
	Managed []tiManaged `xml:"managedTypeInfo,omitempty"`
	Data    []tiData    `xml:"dataTypeInfo,omitempty"`
}

var optional = []tiAnnotation{{Name: "optional"}}

func prop(name, typ string, opt bool) tiProperty {
	p := tiProperty{Name: name, Version: cliVersion, Type: typ}
	if opt {
		p.Annotation = optional
	}
	return p
}

// cliInfoTypes are vim.CLIInfo and its structures: what FetchCLIInfo answers
// (name, displayName, help, method[] with param[], ret and hints as
// vim.KeyValue[]; param with aliases[], default, constraint[], flag), the
// fields VMware's esxcli reads (esxcli.py: CLIApp, CLIMethod, CLIParam).
func cliInfoTypes() ([]tiManaged, []tiData) {
	fetch := func(name, arg string) tiMethod {
		return tiMethod{Name: name, WsdlName: "VimCLIInfo" + strings.ToUpper(name[:1]) + name[1:], Version: cliVersion,
			ParamTypeInfo:  []tiParam{{Name: arg, Version: cliVersion, Type: "string"}},
			ReturnTypeInfo: &tiParam{Name: "result", Version: cliVersion, Type: "vim.CLIInfo.Info"},
			Fault:          []string{"vim.fault.NotFound"}}
	}
	managed := []tiManaged{{Name: cliInfoType, WsdlName: "VimCLIInfo", Version: cliVersion,
		Base: []string{"vmodl.ManagedObject"},
		Method: []tiMethod{fetch("fetchCLIInfo", "typeName"),
			fetch("fetchCLIInfoFromDisplayName", "displayName")}}}
	data := []tiData{
		{Name: "vim.CLIInfo.Info", WsdlName: "VimCLIInfoInfo", Version: cliVersion, Base: []string{"vmodl.DynamicData"},
			Property: []tiProperty{prop("name", "string", false), prop("displayName", "string", true),
				prop("help", "string", true), prop("method", "vim.CLIInfo.Method[]", true)}},
		{Name: "vim.CLIInfo.Method", WsdlName: "VimCLIInfoMethod", Version: cliVersion, Base: []string{"vmodl.DynamicData"},
			Property: []tiProperty{prop("name", "string", false), prop("displayName", "string", true),
				prop("help", "string", true), prop("param", "vim.CLIInfo.Param[]", true),
				prop("ret", "vim.CLIInfo.Param", true), prop("hints", "vim.KeyValue[]", true)}},
		{Name: "vim.CLIInfo.Param", WsdlName: "VimCLIInfoParam", Version: cliVersion, Base: []string{"vmodl.DynamicData"},
			Property: []tiProperty{prop("name", "string", false), prop("displayName", "string", true),
				prop("help", "string", true), prop("aliases", "string[]", true), prop("default", "string", true),
				prop("constraint", "string[]", true), prop("flag", "boolean", true)}},
	}
	return managed, data
}

// cliFaultData is vim.EsxCLI.CLIFault: a RuntimeFault with the error lines (errMsg).
func cliFaultData() tiData {
	return tiData{Name: cliFaultType, WsdlName: cliFaultWsdl, Version: cliVersion, Base: []string{"vmodl.RuntimeFault"},
		Property: []tiProperty{prop("errMsg", "string[]", false)}}
}

// typeInfo is the app's managed type and result structures.
func (a *cliApp) typeInfo() (tiManaged, []tiData) {
	mt := tiManaged{Name: a.moType(), WsdlName: a.wsdl(), Version: cliVersion, Base: []string{"vmodl.ManagedObject"}}
	var data []tiData
	for i := range a.Methods {
		m := &a.Methods[i]
		tm := tiMethod{Name: m.Name, WsdlName: a.wsdl() + m.Name, Version: cliVersion, Fault: []string{cliFaultType}}
		for _, p := range m.Params {
			tp := tiParam{Name: p.Name, Version: cliVersion, Type: orDefault(p.Type, "string")}
			if !p.Required {
				tp.Annotation = optional
			}
			tm.ParamTypeInfo = append(tm.ParamTypeInfo, tp)
		}
		ret := tiParam{Name: "result", Version: cliVersion, Type: orDefault(m.Result, "boolean"), Annotation: optional}
		if !m.simpleResult() {
			name, wsdl := a.dataType(m, m.Result)
			ret.Type = name
			if m.List {
				ret.Type += "[]"
			}
			td := tiData{Name: name, WsdlName: wsdl, Version: cliVersion, Base: []string{"vmodl.DynamicData"}}
			for _, f := range a.Types[m.Result] {
				td.Property = append(td.Property, prop(f.prop(), f.vmodlType(), true))
			}
			data = append(data, td)
		}
		tm.ReturnTypeInfo = &ret
		mt.Method = append(mt.Method, tm)
	}
	return mt, data
}

// queryTypeInfo is every type whose name contains substr ("" : all).
func queryTypeInfo(substr string) allTypeInfo {
	var all allTypeInfo
	managed, data := cliInfoTypes()
	data = append(data, cliFaultData())
	for i := range esxcliApps {
		mt, dt := esxcliApps[i].typeInfo()
		managed = append(managed, mt)
		data = append(data, dt...)
	}
	for _, m := range managed {
		if strings.Contains(m.Name, substr) {
			all.Managed = append(all.Managed, m)
		}
	}
	for _, d := range data {
		if strings.Contains(d.Name, substr) {
			all.Data = append(all.Data, d)
		}
	}
	return all
}

// --- vim.CLIInfo.Info (FetchCLIInfo) ---

type ciKeyValue struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type ciParam struct {
	Name        string   `xml:"name"`
	DisplayName string   `xml:"displayName,omitempty"`
	Help        string   `xml:"help,omitempty"`
	Aliases     []string `xml:"aliases,omitempty"`
	Flag        bool     `xml:"flag"`
}

type ciMethod struct {
	Name        string       `xml:"name"`
	DisplayName string       `xml:"displayName"`
	Help        string       `xml:"help"`
	Param       []ciParam    `xml:"param,omitempty"`
	Ret         *ciParam     `xml:"ret,omitempty"`
	Hints       []ciKeyValue `xml:"hints,omitempty"`
}

// ciInfo is vim.CLIInfo.Info as XML (the response of FetchCLIInfo).
type ciInfo struct {
	XMLName     xml.Name   `xml:"obj"`
	Name        string     `xml:"name"`
	DisplayName string     `xml:"displayName"`
	Help        string     `xml:"help"`
	Method      []ciMethod `xml:"method,omitempty"`
}

// cliInfo is the CLI info of an app (vim.EsxCLI.<path>) or of a namespace above apps.
func cliInfo(typeName string) (*ciInfo, bool) {
	path := strings.TrimPrefix(typeName, cliNamePrefix)
	info := &ciInfo{Name: path}
	info.DisplayName = path[strings.LastIndexByte(path, '.')+1:]
	for i := range esxcliApps {
		a := &esxcliApps[i]
		if a.Path == path {
			info.Help = a.Help
			for _, m := range a.Methods {
				cm := ciMethod{Name: m.Name, DisplayName: m.Name, Help: m.Help,
					Ret:   &ciParam{Name: "result", DisplayName: "result"},
					Hints: []ciKeyValue{{Key: "formatter", Value: m.Formatter}}}
				if m.Fields != "" {
					cm.Hints = append(cm.Hints, ciKeyValue{Key: "fields:" + m.Result, Value: m.Fields})
				}
				for _, p := range m.Params {
					cm.Param = append(cm.Param, ciParam{Name: p.Name, DisplayName: p.Display, Help: p.Help,
						Aliases: p.Aliases, Flag: p.Flag})
				}
				info.Method = append(info.Method, cm)
			}
			return info, true
		}
		if strings.HasPrefix(a.Path, path+".") {
			info.Help = namespaceHelp[path]
			return info, true
		}
	}
	return nil, false
}

// namespaceHelp is the help ESXi shows for the namespaces above the served apps.
var namespaceHelp = map[string]string{
	"system":                   "VMKernel system properties and commands for configuring properties of the kernel core system and related system services.",
	"system.settings":          "Host system settings.",
	"hardware":                 "VMKernel hardware properties and commands for configuring hardware.",
	"graphics":                 "VMware graphics commands.",
	"network":                  "Operations that pertain to the maintenance of networking on the ESX host.",
	"rdma":                     "Operations that pertain to remote direct memory access (RDMA) protocol stack on the ESX host.",
	"storage":                  "VMware storage commands.",
	"storage.core":             "VMware core storage commands.",
	"storage.core.device":      "Operations on storage devices.",
	"storage.core.device.vaai": "Operations on VAAI (vStorage APIs for Array Integration) support for devices.",
	"software":                 "Manage the ESXi software image and packages.",
}
