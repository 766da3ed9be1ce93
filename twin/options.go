package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Advanced options as ESXi's OptionManager keeps them (vSphere API reference,
// OptionManager): the host declares each option it has in supportedOption
// (OptionDef with an OptionType: BoolOption, StringOption, IntOption,
// LongOption, ...), also visible as HostConfigInfo.optionDef. UpdateOptions
// with a key the host does not have raises InvalidName (stock vcsim silently
// creates it), and a value of another type than the declared one raises
// InvalidArgument. Whether VMkernel.Boot.atsSupport exists, and its type,
// depends on the ESXi build (HostDesc.ATSOption, ATSType).

func atsOptionDef(kind string) types.OptionDef {
	def := types.OptionDef{ElementDescription: types.ElementDescription{
		Description: types.Description{
			Label:   "atsSupport",
			Summary: "Enable Support for PCIe Address Translation Services (ATS)",
		},
		Key: atsOption,
	}}
	if kind == "string" {
		def.OptionType = &types.StringOption{DefaultValue: "FALSE"}
	} else {
		def.OptionType = &types.BoolOption{Supported: true, DefaultValue: false}
	}
	return def
}

func atsValue(kind string, on bool) interface{} {
	if kind == "string" {
		if on {
			return "TRUE"
		}
		return "FALSE"
	}
	return on
}

// checkOptionValue: InvalidName for a key the host lacks, InvalidArgument for a wrong type.
func (m *HostOptions) checkOptionValue(o *types.OptionValue) *soap.Fault {
	if m.find(o.Key) == nil {
		return simulator.Fault(fmt.Sprintf("A specified parameter was not correct: %s", o.Key),
			&types.InvalidName{Name: o.Key})
	}
	for _, def := range m.SupportedOption {
		if def.Key != o.Key {
			continue
		}
		ok := true
		switch def.OptionType.(type) {
		case *types.BoolOption:
			_, ok = o.Value.(bool)
		case *types.StringOption:
			_, ok = o.Value.(string)
		case *types.IntOption:
			_, ok = o.Value.(int32)
		case *types.LongOption:
			_, ok = o.Value.(int64)
		}
		if !ok {
			return simulator.Fault(fmt.Sprintf("A specified parameter was not correct: %s (%T for a %T)",
				o.Key, o.Value, def.OptionType), &types.InvalidArgument{InvalidProperty: o.Key})
		}
	}
	return nil
}

// UpdateOptions checks every change like ESXi, then applies them; a boot option
// marks the host as needing a reboot (summary.rebootRequired).
func (m *HostOptions) UpdateOptions(req *types.UpdateOptions) soap.HasFault {
	for _, change := range req.ChangedValue {
		if fault := m.checkOptionValue(change.GetOptionValue()); fault != nil {
			return &methods.UpdateOptionsBody{Fault_: fault}
		}
	}
	body := m.OptionManager.UpdateOptions(req)
	if body.Fault() != nil {
		return body
	}
	simulator.Map.WithLock(m.host, func() {
		for _, change := range req.ChangedValue {
			if len(change.GetOptionValue().Key) > 14 && change.GetOptionValue().Key[:14] == "VMkernel.Boot." {
				m.host.Summary.RebootRequired = true
			}
		}
		m.host.Config.Option = m.Setting
	})
	return body
}
