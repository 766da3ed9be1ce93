package main

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// replaceField makes CustomFieldsManager.SetField replace the entity's value for that key,
// as vCenter does (vSphere API reference: SetField "assigns a value to a custom field on an
// entity"; ManagedEntity.customValue holds one value per field key). govmomi 0.24's
// simulator appends a second value instead, so a cleared value (rackcert's maintenance
// mark set to "") still read as the old one beside it. The old values go here; the
// simulator then adds the new one.
func replaceField(method *simulator.Method) {
	req, ok := method.Body.(*types.SetField)
	if !ok {
		return
	}
	obj := simulator.Map.Get(req.Entity)
	if obj == nil {
		return
	}
	ent, ok := obj.(mo.Entity)
	if !ok {
		return
	}
	simulator.Map.WithLock(obj, func() {
		e := ent.Entity()
		e.CustomValue = withoutKey(e.CustomValue, req.Key)
		e.Value = withoutKey(e.Value, req.Key)
	})
}

func withoutKey(values []types.BaseCustomFieldValue, key int32) []types.BaseCustomFieldValue {
	out := make([]types.BaseCustomFieldValue, 0, len(values))
	for _, v := range values {
		if v.GetCustomFieldValue().Key != key {
			out = append(out, v)
		}
	}
	return out
}
