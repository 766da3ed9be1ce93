package main

// Description is the rack the twin simulates, as rackcert/lab/twin.py writes it.
// Python derives it from a rack spec (or from a host count for the benchmark),
// so the Go side only turns data into simulator objects.
type Description struct {
	Listen       string `json:"listen"` // 127.0.0.1:PORT (0: any free port)
	User         string `json:"user"`
	PasswordFile string `json:"password_file"`
	TLS          bool   `json:"tls"`
	CertFile     string `json:"cert_file"` // PEM certificate, written if absent
	KeyFile      string `json:"key_file"`
	Datacenter   string `json:"datacenter"`
	Cluster      string `json:"cluster"`
	// VcenterVersion is the vCenter release the twin stands for (vsphere8.go): 7.0.3 or 8.0.3.
	VcenterVersion string     `json:"vcenter_version"`
	Hosts          []HostDesc `json:"hosts"`
	VMs            []VMDesc   `json:"vms"`
	// The site's templates, datastores and port groups (template.go).
	Templates  []TemplateDesc `json:"templates"`
	Datastores []string       `json:"datastores"`
	Networks   []string       `json:"networks"`
	Faults     Faults         `json:"faults"`
	Reboot     RebootDesc     `json:"reboot"` // how long a host reboot takes (reboot.go)
	Clock      ClockDesc      `json:"clock"`  // modelled durations and their scale (clock.go)
	// AgentVMs is the number of vCLS agent VMs (agents.go); nil: vCenter's own rule.
	AgentVMs *int `json:"agent_vms"`
	// PageSize is the PropertyCollector's own page limit (collector.go); 0: none.
	PageSize int `json:"page_size"`
	// Depots are the offline bundles the hosts can install from (esxcli software vib install
	// -d, hostsoftware.go): a path on a datastore and the VIBs the bundle holds.
	Depots []DepotDesc `json:"depots"`
	// vSphere Lifecycle Manager: whether the cluster is managed by an image, and the depot's
	// base images and components (vlcm.go).
	Vlcm VlcmDesc `json:"vlcm"`
}

// DepotDesc is one offline bundle (.zip) a host can read, and the VIBs in it.
type DepotDesc struct {
	Path string `json:"path"`
	VIBs []VIB  `json:"vibs"`
	// Image profiles in the bundle: a name and the names of its VIBs (of this bundle).
	Profiles []ProfileDesc `json:"profiles"`
}

// ProfileDesc is an image profile of an offline bundle.
type ProfileDesc struct {
	Name string   `json:"name"`
	VIBs []string `json:"vibs"`
}

// HostDesc is one ESXi host with the PCI devices of its hardware profile.
type HostDesc struct {
	Name      string    `json:"name"`
	Vendor    string    `json:"vendor"`
	Model     string    `json:"model"`
	Version   string    `json:"esxi_version"`
	Build     string    `json:"esxi_build"`
	NumaNodes int       `json:"numa_nodes"`
	ATS       bool      `json:"ats"`
	MemoryGB  int64     `json:"memory_gb"`
	PCI       []PCIDesc `json:"pci"`
	VgpuTypes []string  `json:"vgpu_types"`
	// NoVGPUManager: the host's GPUs support VgpuTypes, but the NVIDIA vGPU manager VIB is not
	// installed: no manager VIB, no profile offered, until one is installed and the host boots.
	NoVGPUManager bool `json:"no_vgpu_manager"`
	Maintenance   bool `json:"maintenance"`
	// ATSOption false: this ESXi build has no VMkernel.Boot.atsSupport (options.go).
	ATSOption *bool `json:"ats_option"`
	// ATSType is the option's declared type: "bool" (default) or "string".
	ATSType string `json:"ats_type"`
	// RebindWithoutReboot is HostCapability.deviceRebindWithoutRebootSupported (7.0+).
	RebindWithoutReboot bool `json:"rebind_without_reboot"`
	// GraphicsType is the host's default graphics type at start: shared (default) or sharedDirect.
	GraphicsType string `json:"graphics_type"`
	// CPU is the server model's processors (shapes.go); absent: the simulator's.
	CPU CPUDesc `json:"cpu"`
	// NoEsxcli: the host does not answer esxcli over the API (esxcli.go), as a host
	// whose vCenter role lacks Host.Config or whose hostd refuses the executer.
	NoEsxcli bool `json:"no_esxcli"`
	// ManagementIP is vmk0's address (hostidentity.go); empty: the name if an IP, else the lab range.
	ManagementIP string `json:"management_ip"`
	// VIBs is the host's software (hostsoftware.go); nil: the VIBs its hardware needs.
	VIBs []VIB `json:"vibs"`
	// DeviceGroups are the host's vendor device groups (devicegroups.go): an HGX board's
	// Fabric Manager partitions, NVLink-bridged PCIe pairs; served only on vSphere 8.
	DeviceGroups []DeviceGroupDesc `json:"device_groups"`
}

// DeviceGroupDesc is one vendor device group of a host, as ESXi's NVIDIA GPU manager
// reports it: its name, and its GPUs (PCI ids) with the backing each takes in a VM.
type DeviceGroupDesc struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	GPUs        []string `json:"gpus"`
	// Vgpu is the vGPU profile each member offers ("": the members are passthrough GPUs).
	Vgpu string `json:"vgpu"`
	// DeviceNames, when given, are the members' device names as captured (a replayed vGPU
	// member names no PCI function to look its name up by).
	DeviceNames []string `json:"device_names"`
}

// PCIDesc is one PCI function as ESXi reports it in hardware.pciDevice.
type PCIDesc struct {
	ID              string `json:"id"`
	VendorID        int    `json:"vendor_id"`
	DeviceID        int    `json:"device_id"`
	SubVendorID     int    `json:"sub_vendor_id"`
	SubDeviceID     int    `json:"sub_device_id"`
	ClassID         int    `json:"class_id"`
	VendorName      string `json:"vendor_name"`
	DeviceName      string `json:"device_name"`
	ParentBridge    string `json:"parent_bridge"`
	Numa            int    `json:"numa"`
	PassthruCapable bool   `json:"passthru_capable"`
	PassthruEnabled bool   `json:"passthru_enabled"`
	PassthruActive  bool   `json:"passthru_active"`
}

// VMDesc is a VM that exists before rackcert runs (for tests of powered-on VMs).
type VMDesc struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	PowerOn  bool   `json:"power_on"`
	CPUs     int32  `json:"cpus"`
	MemoryMB int64  `json:"memory_mb"`
	Firmware string `json:"firmware"`
	DiskGB   int64  `json:"disk_gb"` // 0: no disk (a VM that cannot boot)
}

// Faults asks the twin to misbehave, the way a real vCenter sometimes does.
type Faults struct {
	// Fail makes the first Count calls of Method (a *_Task method) on the object
	// named Target (any object when empty) return a task that ends in error.
	Fail []FailFault `json:"fail"`
	// Slow delays every call of Method by Ms milliseconds.
	Slow []SlowFault `json:"slow"`
	// Drop closes the connection, without an answer, on the first Count calls of Method.
	Drop []DropFault `json:"drop"`
	// Panic makes the handler itself panic on the first Count calls of Method: the test
	// that the twin counts handler panics, and the test session fails on them.
	Panic []DropFault `json:"panic"`
}

type FailFault struct {
	Method  string `json:"method"`
	Target  string `json:"target"`
	Count   int    `json:"count"`
	Message string `json:"message"`
}

type SlowFault struct {
	Method string `json:"method"`
	Ms     int    `json:"ms"`
}

type DropFault struct {
	Method string `json:"method"`
	Count  int    `json:"count"`
}
