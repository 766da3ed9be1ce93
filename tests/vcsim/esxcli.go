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

// esxcli over the vSphere API, the way `govc host.esxcli` reaches it:
// HostSystem.RetrieveManagedMethodExecuter() gives the host's
// ReflectManagedMethodExecuter, whose ExecuteSoap(moid, version, method,
// argument[]) runs an esxcli command and answers its output as XML text (an
// <obj xsi:type="ArrayOfDataObject"> of DataObjects, one element per column).
// The twin runs `esxcli system settings kernel list [-o NAME]` (moid
// ha-cli-handler-system-settings-kernel, method
// vim.EsxCLI.system.settings.kernel.list) and `... kernel set -s NAME -v
// VALUE` for the ATS boot option. ESXi's `kernel list` shows each VMkernel
// boot option's Configured value (what the next boot uses; the same setting
// as the advanced option VMkernel.Boot.<name>) and its Runtime value (what
// this boot runs with), which changes only at a reboot. Both methods are
// internal to the API (govmomi keeps their types in its internal package), so
// the twin declares them itself.

// RetrieveManagedMethodExecuterRequest is HostSystem.RetrieveManagedMethodExecuter.
type RetrieveManagedMethodExecuterRequest struct {
	This types.ManagedObjectReference `xml:"_this"`
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
	types.Add("RetrieveManagedMethodExecuter", reflect.TypeOf((*RetrieveManagedMethodExecuterRequest)(nil)).Elem())
	types.Add("ExecuteSoap", reflect.TypeOf((*ExecuteSoapRequest)(nil)).Elem())
}

const executerPrefix = "managedMethodExecuter-"

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

// answerEsxcli answers the two esxcli calls; false: not one of them.
func answerEsxcli(w http.ResponseWriter, method *simulator.Method) bool {
	switch req := method.Body.(type) {
	case *RetrieveManagedMethodExecuterRequest:
		hs, ok := simulator.Map.Get(req.This).(*simulator.HostSystem)
		if !ok {
			writeSoapFault(w, "ManagedObjectNotFound", fmt.Sprintf("no host %s", req.This.Value))
			return true
		}
		if _, off := noEsxcli.Load(hs.Self.Value); off {
			writeSoapFault(w, "NotSupported", fmt.Sprintf("host %s does not answer esxcli", hs.Name))
			return true
		}
		writeRaw(w, "RetrieveManagedMethodExecuter", `<returnval type="ReflectManagedMethodExecuter">`+
			executerPrefix+hs.Self.Value+`</returnval>`)
		return true
	case *ExecuteSoapRequest:
		hs := hostByMoid(strings.TrimPrefix(req.This.Value, executerPrefix))
		if hs == nil || !strings.HasPrefix(req.This.Value, executerPrefix) {
			writeSoapFault(w, "ManagedObjectNotFound", fmt.Sprintf("no executer %s", req.This.Value))
			return true
		}
		out, fault := runEsxcli(hs, req)
		var text strings.Builder
		if fault != "" {
			text.WriteString("<returnval><fault><faultMsg>")
			_ = xml.EscapeText(&text, []byte(fault))
			text.WriteString("</faultMsg></fault></returnval>")
		} else {
			text.WriteString("<returnval><response>")
			_ = xml.EscapeText(&text, []byte(out))
			text.WriteString("</response></returnval>")
		}
		writeRaw(w, "ExecuteSoap", text.String())
		return true
	}
	return false
}

func argument(req *ExecuteSoapRequest, name string) string {
	for _, a := range req.Argument {
		if a.Name == name {
			var v struct {
				Value string `xml:",chardata"`
			}
			if xml.Unmarshal([]byte(a.Val), &v) == nil {
				return v.Value
			}
		}
	}
	return ""
}

// runEsxcli is the command's XML output, or the esxcli error message.
func runEsxcli(hs *simulator.HostSystem, req *ExecuteSoapRequest) (string, string) {
	if req.Moid != "ha-cli-handler-system-settings-kernel" {
		return "", fmt.Sprintf("Unknown command or namespace: %s", req.Moid)
	}
	options, _ := simulator.Map.Get(*hs.ConfigManager.AdvancedOption).(*HostOptions)
	if options == nil {
		return "", "Unable to reach the host's configuration"
	}
	switch req.Method {
	case "vim.EsxCLI.system.settings.kernel.list":
		name := argument(req, "option")
		var rows []string
		opt := options.find(atsOption)
		if opt != nil && (name == "" || name == "atsSupport") {
			runtime, _ := atsRuntime.Load(hs.Self.Value)
			rows = append(rows, fmt.Sprintf(`<DataObject xsi:type="VimEsxCLIsystemsettingskernellistKernelSetting">`+
				`<Configured>%s</Configured><Default>FALSE</Default>`+
				`<Description>Enable Support for PCIe Address Translation Services (ATS)</Description>`+
				`<Name>atsSupport</Name><Runtime>%s</Runtime><Type>Bool</Type></DataObject>`,
				upperBool(truthy(opt.Value)), upperBool(runtime == true)))
		}
		return `<obj xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"` +
			` xmlns="urn:vim25" versionId="7.0.3.0" xsi:type="ArrayOfDataObject">` + strings.Join(rows, "") + `</obj>`, ""
	case "vim.EsxCLI.system.settings.kernel.set":
		if argument(req, "setting") != "atsSupport" || options.find(atsOption) == nil {
			return "", fmt.Sprintf("Invalid Key Name: %s", argument(req, "setting"))
		}
		on := truthy(argument(req, "value"))
		var value interface{} = on
		for _, def := range options.SupportedOption {
			if _, isString := def.OptionType.(*types.StringOption); isString && def.Key == atsOption {
				value = upperBool(on)
			}
		}
		body := options.UpdateOptions(&types.UpdateOptions{
			ChangedValue: []types.BaseOptionValue{&types.OptionValue{Key: atsOption, Value: value}},
		})
		if f := body.Fault(); f != nil {
			return "", f.String
		}
		return `<obj xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"` +
			` xmlns="urn:vim25" versionId="7.0.3.0" xsi:type="xsd:boolean">true</obj>`, ""
	}
	return "", fmt.Sprintf("Unknown method: %s", req.Method)
}

func upperBool(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
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
