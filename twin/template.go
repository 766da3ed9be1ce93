package main

// VM templates and CloneVM_Task as vCenter does them.
//
// A site prepares a template once (a cloud image with cloud-init, imported and
// marked as template): it has a disk on a datastore, a vmxnet3 NIC on a port
// group, a guestId and a firmware. The datastores and port groups a spec names
// exist on every host, as an admin sets them up (shared datastore; a standard
// port group of the same name on each host, which vCenter shows as one Network).
//
// govmomi 0.24's CloneVM_Task is lenient where vCenter is not; cloneTask
// replaces it for templates (the Interceptor routes CloneVM_Task of a template
// here; the clone is built through the simulator's own API, in process):
//   - it places the clone on the source's host and ignores spec.location.host;
//     vCenter places it on location.host, which must belong to the compute
//     resource of location.pool (VirtualMachineRelocateSpec);
//   - it copies only CPUs, memory and devices, dropping firmware, hardware
//     version and the source's extraConfig; vCenter copies the whole
//     configuration (the .vmx) and gives NICs with generated MACs new ones;
//   - it clears the source template's own disk backing while copying it;
//   - it ignores spec.config except extraConfig; vCenter applies it as a
//     reconfigure of the clone ("An optional specification of changes to the
//     virtual hardware", VirtualMachineCloneSpec.config) and honours powerOn;
//   - it does not check the target datastore or the name; vCenter answers
//     InvalidDatastore for a datastore the host cannot see and DuplicateName
//     for a name already used in the folder (VirtualMachine.CloneVM_Task faults).
// vSphere Web Services API reference: VirtualMachine.CloneVM_Task,
// VirtualMachineCloneSpec, VirtualMachineRelocateSpec ("pool ... For a clone
// operation from a template to a virtual machine, this argument is required").

import (
	"context"
	"fmt"
	"io/ioutil"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TemplateDesc is one VM template of the site, as rackcert/lab/twin.py describes it.
type TemplateDesc struct {
	Name      string `json:"name"`
	Host      string `json:"host"`
	Datastore string `json:"datastore"`
	Network   string `json:"network"`
	GuestID   string `json:"guest_id"`
	Firmware  string `json:"firmware"`
	Version   string `json:"hardware_version"`
	DiskGB    int64  `json:"disk_gb"`
	CPUs      int32  `json:"cpus"`
	MemoryMB  int64  `json:"memory_mb"`
}

// site is the in-process client the clone is built with (set by addSiteObjects).
var site *vim25.Client

// addSiteObjects creates the description's datastores and port groups on every host.
func addSiteObjects(ctx context.Context, c *vim25.Client, rack *Rack, desc *Description) error {
	site = c
	tools := &toolsModel{} // tools.go
	simulator.Map.AddHandler(tools)
	for _, vm := range simulator.Map.All("VirtualMachine") {
		tools.PutObject(vm) // those made before the handler: nothing reported yet
	}
	simulator.Map.AddHandler(&vmShape{}) // vmshape.go
	for _, name := range desc.Datastores {
		dir, err := ioutil.TempDir("", "rackcert-vcsim-"+name+"-")
		if err != nil {
			return err
		}
		for _, hs := range rack.Hosts {
			dss, err := object.NewHostSystem(c, hs.Reference()).ConfigManager().DatastoreSystem(ctx)
			if err != nil {
				return err
			}
			if _, err = dss.CreateLocalDatastore(ctx, name, dir); err != nil {
				return fmt.Errorf("datastore %s on %s: %v", name, hs.Name, err)
			}
		}
		sizeSiteDatastore(name)
	}
	for _, name := range desc.Networks {
		var netRef *types.ManagedObjectReference
		for _, hd := range desc.Hosts {
			hs := rack.Hosts[hd.Name]
			if netRef == nil {
				ns, err := object.NewHostSystem(c, hs.Reference()).ConfigManager().NetworkSystem(ctx)
				if err != nil {
					return err
				}
				spec := types.HostPortGroupSpec{Name: name, VswitchName: "vSwitch0",
					Policy: types.HostNetworkPolicy{}}
				if err := ns.AddPortGroup(ctx, spec); err != nil {
					return fmt.Errorf("port group %s on %s: %v", name, hs.Name, err)
				}
				for _, ref := range simulator.Map.All("Network") {
					if n, ok := ref.(*mo.Network); ok && n.Name == name {
						r := n.Self
						netRef = &r
					}
				}
				if netRef == nil {
					return fmt.Errorf("port group %s: no Network object", name)
				}
			}
			ref := *netRef
			simulator.Map.WithLock(hs, func() {
				for _, have := range hs.Network {
					if have == ref {
						return
					}
				}
				hs.Network = append(hs.Network, ref)
			})
			if n, ok := simulator.Map.Get(ref).(*mo.Network); ok {
				simulator.Map.WithLock(n, func() {
					for _, have := range n.Host {
						if have == hs.Self {
							return
						}
					}
					n.Host = append(n.Host, hs.Self)
				})
			}
		}
	}
	return nil
}

// siteDatastoreBytes is the size of a site datastore (a PowerScale NFS export is tens of
// TB). The simulator sizes a datastore by the file system of its temporary directory and
// subtracts every disk's full capacity, thin or not, which on a laptop-sized temp file
// system leaves the rack's datastore with negative free space (DatastoreSummary.freeSpace).
const siteDatastoreBytes = int64(64) << 40

func sizeSiteDatastore(name string) {
	ds := findDatastore(name)
	if ds == nil {
		return
	}
	simulator.Map.WithLock(ds, func() {
		used := ds.Summary.Capacity - ds.Summary.FreeSpace
		ds.Summary.Capacity = siteDatastoreBytes
		ds.Summary.FreeSpace = siteDatastoreBytes - used
		info := ds.Info.GetDatastoreInfo()
		info.FreeSpace = ds.Summary.FreeSpace
		info.MaxFileSize = ds.Summary.FreeSpace
	})
}

func findNetwork(name string) *types.ManagedObjectReference {
	for _, ref := range simulator.Map.All("Network") {
		if n, ok := ref.(*mo.Network); ok && n.Name == name {
			r := n.Self
			return &r
		}
	}
	return nil
}

func findDatastore(name string) *simulator.Datastore {
	for _, obj := range simulator.Map.All("Datastore") {
		if ds, ok := obj.(*simulator.Datastore); ok && ds.Name == name {
			return ds
		}
	}
	return nil
}

// createTemplate builds a template VM: pvscsi controller with one thin disk, a
// vmxnet3 NIC on the port group, then MarkAsTemplate.
func createTemplate(ctx context.Context, c *vim25.Client, folders *object.DatacenterFolders,
	pool *object.ResourcePool, rack *Rack, td TemplateDesc) error {
	hs, ok := rack.Hosts[td.Host]
	if !ok {
		return fmt.Errorf("no host %s", td.Host)
	}
	if findDatastore(td.Datastore) == nil {
		return fmt.Errorf("no datastore %s", td.Datastore)
	}
	changes, err := diskSpec(td.Datastore, td.DiskGB)
	if err != nil {
		return err
	}
	if td.Network != "" {
		netRef := findNetwork(td.Network)
		if netRef == nil {
			return fmt.Errorf("no port group %s", td.Network)
		}
		nic, err := object.VirtualDeviceList{}.CreateEthernetCard("vmxnet3", &types.VirtualEthernetCardNetworkBackingInfo{
			VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: td.Network},
			Network:                        netRef,
		})
		if err != nil {
			return err
		}
		changes = append(changes, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: nic,
		})
	}
	spec := types.VirtualMachineConfigSpec{
		Name:         td.Name,
		GuestId:      orDefault(td.GuestID, "ubuntu64Guest"),
		Version:      orDefault(td.Version, "vmx-19"),
		Firmware:     orDefault(td.Firmware, "efi"),
		NumCPUs:      td.CPUs,
		MemoryMB:     td.MemoryMB,
		Files:        &types.VirtualMachineFileInfo{VmPathName: "[" + td.Datastore + "]"},
		DeviceChange: changes,
	}
	task, err := folders.VmFolder.CreateVM(ctx, spec, pool, object.NewHostSystem(c, hs.Reference()))
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	ref := info.Result.(types.ManagedObjectReference)
	return object.NewVirtualMachine(c, ref).MarkAsTemplate(ctx)
}

// diskSpec adds a pvscsi controller and one thin disk of sizeGB on the datastore.
func diskSpec(datastore string, sizeGB int64) ([]types.BaseVirtualDeviceConfigSpec, error) {
	ds := findDatastore(datastore)
	if ds == nil {
		return nil, fmt.Errorf("no datastore %s", datastore)
	}
	var devices object.VirtualDeviceList
	scsi, err := devices.CreateSCSIController("pvscsi")
	if err != nil {
		return nil, err
	}
	devices = append(devices, scsi)
	disk := devices.CreateDisk(scsi.(types.BaseVirtualController), ds.Reference(), "")
	disk.CapacityInKB = sizeGB * 1024 * 1024
	devices = append(devices, disk)
	changes, err := devices.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return nil, err
	}
	for _, change := range changes {
		if _, isDisk := change.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); isDisk {
			change.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	return changes, nil
}

// cloneTask clones a template the way vCenter does (see the file comment).
func cloneTask(t *simulator.VirtualMachine, req *types.CloneVM_Task) types.ManagedObjectReference {
	target := t.Runtime.Host
	if req.Spec.Location.Host != nil {
		target = req.Spec.Location.Host
	}
	if target == nil {
		return failedTask(t, "CloneVM_Task", &types.InvalidArgument{InvalidProperty: "spec.location.host"},
			"A specified parameter was not correct: spec.location.host")
	}
	if f, msg := placementRefusal(target, "deploying "+req.Name); f != nil { // hoststate.go
		return failedTask(t, "CloneVM_Task", f, msg)
	}
	// The copy takes its modelled time, queued behind vCenter's limits (clock.go, limits.go).
	source, datastore := "", ""
	if t.Runtime.Host != nil {
		source = t.Runtime.Host.Value
	}
	datastore, _ = parsePath(t.Config.Files.VmPathName)
	if req.Spec.Location.Datastore != nil {
		if ds, ok := simulator.Map.Get(*req.Spec.Location.Datastore).(*simulator.Datastore); ok {
			datastore = ds.Name
		}
	}
	costs := cloneCosts(source, target.Value, datastore)
	return timedTask(t, "clone", cloneSeconds(t), costs, func() (types.AnyType, types.BaseMethodFault) {
		return clone(t, req)
	})
}

func clone(t *simulator.VirtualMachine, req *types.CloneVM_Task) (types.AnyType, types.BaseMethodFault) {
	ctx := context.Background()
	loc := req.Spec.Location
	if loc.Pool == nil {
		return nil, &types.InvalidArgument{InvalidProperty: "spec.location.pool"}
	}
	folder, ok := simulator.Map.Get(req.Folder).(*simulator.Folder)
	if !ok {
		return nil, &types.ManagedObjectNotFound{Obj: req.Folder}
	}
	for _, child := range folder.ChildEntity {
		if e, ok := simulator.Map.Get(child).(mo.Entity); ok && e.Entity().Name == req.Name {
			return nil, &types.DuplicateName{Name: req.Name, Object: child}
		}
	}
	host := *t.Runtime.Host
	if loc.Host != nil {
		host = *loc.Host
	}
	hs, ok := simulator.Map.Get(host).(*simulator.HostSystem)
	if !ok {
		return nil, &types.ManagedObjectNotFound{Obj: host}
	}
	if !poolHasHost(*loc.Pool, host) {
		return nil, &types.InvalidArgument{InvalidProperty: "spec.location.host"}
	}
	dsName, _ := parsePath(t.Config.Files.VmPathName)
	if loc.Datastore != nil {
		ds, ok := simulator.Map.Get(*loc.Datastore).(*simulator.Datastore)
		if !ok {
			return nil, &types.ManagedObjectNotFound{Obj: *loc.Datastore}
		}
		dsName = ds.Name
	}
	ds := hostDatastore(hs, dsName)
	if ds == nil {
		return nil, &types.InvalidDatastore{Name: dsName}
	}
	config := copyConfig(t, req.Name, ds)
	created, err := object.NewFolder(site, req.Folder).CreateVM(ctx, config,
		object.NewResourcePool(site, *loc.Pool), object.NewHostSystem(site, host))
	if err != nil {
		return nil, asFault(err)
	}
	info, err := created.WaitForResult(ctx, nil)
	if err != nil {
		return nil, asFault(err)
	}
	ref := info.Result.(types.ManagedObjectReference)
	vm := object.NewVirtualMachine(site, ref)
	if req.Spec.Config != nil {
		if err := waitFault(vm.Reconfigure(ctx, *req.Spec.Config)); err != nil {
			return nil, err
		}
	}
	if req.Spec.PowerOn {
		// The clone powers on through ESXi's checks, like PowerOnVM_Task (poweron.go).
		clone := simulator.Map.Get(ref).(*simulator.VirtualMachine)
		if f, _ := powerOnFault(clone); f != nil {
			return nil, f
		}
		if err := waitFault(vm.PowerOn(ctx)); err != nil {
			return nil, err
		}
	}
	return ref, nil
}

func waitFault(t *object.Task, err error) types.BaseMethodFault {
	if err == nil {
		err = t.Wait(context.Background())
	}
	if err != nil {
		return asFault(err)
	}
	return nil
}

// asFault keeps a task's own fault (task.Error), else a SystemError with the text.
func asFault(err error) types.BaseMethodFault {
	if te, ok := err.(task.Error); ok {
		return te.Fault()
	}
	return &types.SystemError{Reason: err.Error()}
}

// copyConfig is the source's whole configuration under a new name and datastore.
func copyConfig(t *simulator.VirtualMachine, name string, ds *simulator.Datastore) types.VirtualMachineConfigSpec {
	src := t.Config
	config := types.VirtualMachineConfigSpec{
		Name:                         name,
		GuestId:                      src.GuestId,
		Version:                      src.Version,
		Firmware:                     src.Firmware,
		NumCPUs:                      src.Hardware.NumCPU,
		NumCoresPerSocket:            src.Hardware.NumCoresPerSocket,
		MemoryMB:                     int64(src.Hardware.MemoryMB),
		MemoryReservationLockedToMax: src.MemoryReservationLockedToMax,
		Files:                        &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name + "]"},
	}
	for _, opt := range src.ExtraConfig {
		if o := opt.GetOptionValue(); o.Key != "govcsim" {
			config.ExtraConfig = append(config.ExtraConfig, &types.OptionValue{Key: o.Key, Value: o.Value})
		}
	}
	defaults := object.VirtualDeviceList(esx.VirtualDevice)
	devices := object.VirtualDeviceList(src.Hardware.Device)
	for _, device := range src.Hardware.Device {
		if defaults.Find(devices.Name(device)) != nil {
			continue // CreateVM adds the default devices itself
		}
		var fop types.VirtualDeviceConfigSpecFileOperation
		switch d := device.(type) {
		case *types.VirtualDisk:
			copied := *d
			backing := *d.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
			backing.FileName = "" // a new file under the clone's directory
			backing.Parent = nil
			ref := ds.Reference()
			backing.Datastore = &ref
			copied.Backing = &backing
			device = &copied
			fop = types.VirtualDeviceConfigSpecFileOperationCreate
		case types.BaseVirtualEthernetCard:
			card := d.GetVirtualEthernetCard()
			if card.AddressType == string(types.VirtualEthernetCardMacTypeGenerated) || card.AddressType == "" {
				copied := *d.(*types.VirtualVmxnet3)
				copied.MacAddress = ""
				device = &copied
			}
		}
		config.DeviceChange = append(config.DeviceChange, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: device, FileOperation: fop,
		})
	}
	return config
}

func poolHasHost(pool types.ManagedObjectReference, host types.ManagedObjectReference) bool {
	rp, ok := simulator.Map.Get(pool).(*simulator.ResourcePool)
	if !ok {
		return false
	}
	switch cr := simulator.Map.Get(rp.Owner).(type) {
	case *simulator.ClusterComputeResource:
		for _, h := range cr.Host {
			if h == host {
				return true
			}
		}
	case *mo.ComputeResource:
		for _, h := range cr.Host {
			if h == host {
				return true
			}
		}
	}
	return false
}

func hostDatastore(hs *simulator.HostSystem, name string) *simulator.Datastore {
	for _, ref := range hs.Datastore {
		if ds, ok := simulator.Map.Get(ref).(*simulator.Datastore); ok && ds.Name == name {
			return ds
		}
	}
	return nil
}

// parsePath is the datastore name of "[ds] dir/file.vmx".
func parsePath(path string) (string, error) {
	var p object.DatastorePath
	if !p.FromString(path) {
		return "", fmt.Errorf("not a datastore path: %q", path)
	}
	return p.Datastore, nil
}
