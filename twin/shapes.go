package main

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// The shapes a vCenter 7.0.3 returns for the rack's hosts and cluster, where
// govmomi 0.24's simulator answers with the template host of its ESX model
// (2 CPU threads of an i7 laptop, DRS on, no vSAN configuration).

// CPUDesc is the host's processors, from its server model (rackcert/lab/twin.py
// SERVER_CPUS: the R750xa of the seed's Table 1 has 2 x Intel Xeon Gold 6338,
// 32 cores and 64 threads each at 2.00 GHz, Intel ARK).
type CPUDesc struct {
	Model          string `json:"model"`
	Packages       int    `json:"packages"`
	CoresPerPkg    int    `json:"cores_per_package"`
	ThreadsPerCore int    `json:"threads_per_core"`
	Mhz            int    `json:"mhz"`
}

// shapeHostCPU sets HostHardwareInfo.cpuInfo and cpuPkg (one HostCpuPackage
// per socket with its threadId list), HostNumaNode.cpuID (the threads of the
// node's socket; ESXi numbers threads package by package) and the
// HostHardwareSummary CPU fields, all from one CPUDesc.
func shapeHostCPU(hs *simulator.HostSystem, hw *types.HostHardwareInfo, cpu CPUDesc) {
	if cpu.Packages < 1 || cpu.CoresPerPkg < 1 {
		return
	}
	if cpu.ThreadsPerCore < 1 {
		cpu.ThreadsPerCore = 1
	}
	hz := int64(cpu.Mhz) * 1000000
	threadsPerPkg := cpu.CoresPerPkg * cpu.ThreadsPerCore
	hw.CpuInfo = types.HostCpuInfo{
		NumCpuPackages: int16(cpu.Packages),
		NumCpuCores:    int16(cpu.Packages * cpu.CoresPerPkg),
		NumCpuThreads:  int16(cpu.Packages * threadsPerPkg),
		Hz:             hz,
	}
	hw.CpuPkg = nil
	for p := 0; p < cpu.Packages; p++ {
		pkg := types.HostCpuPackage{Index: int16(p), Vendor: "intel", Hz: hz, BusHz: 100000000, Description: cpu.Model}
		for t := 0; t < threadsPerPkg; t++ {
			pkg.ThreadId = append(pkg.ThreadId, int16(p*threadsPerPkg+t))
		}
		hw.CpuPkg = append(hw.CpuPkg, pkg)
	}
	if hw.NumaInfo != nil && len(hw.NumaInfo.NumaNode) > 0 {
		// One NUMA node per socket on the R750xa; socket p belongs to node p mod nodes.
		for n := range hw.NumaInfo.NumaNode {
			hw.NumaInfo.NumaNode[n].CpuID = nil
		}
		for p := range hw.CpuPkg {
			node := &hw.NumaInfo.NumaNode[p%len(hw.NumaInfo.NumaNode)]
			node.CpuID = append(node.CpuID, hw.CpuPkg[p].ThreadId...)
		}
	}
	summary := hs.Summary.Hardware
	summary.CpuModel = cpu.Model
	summary.CpuMhz = int32(cpu.Mhz)
	summary.NumCpuPkgs = hw.CpuInfo.NumCpuPackages
	summary.NumCpuCores = hw.CpuInfo.NumCpuCores
	summary.NumCpuThreads = hw.CpuInfo.NumCpuThreads
}

// shapeCluster is ClusterComputeResource as the site has it: summary resources
// summed over its hosts (ComputeResourceSummary: totalCpu in MHz over all
// cores, totalMemory in bytes, cores and threads), DRS off (the rack's VMs
// hold DirectPath I/O devices and cannot be moved; README "Not modelled":
// vMotion/DRS) and vSAN not enabled (storage is NFS on PowerScale:
// ClusterConfigInfoEx.vsanConfigInfo with enabled false, which community.vmware's
// vmware_cluster_info reads unconditionally).
func shapeCluster(cluster *simulator.ClusterComputeResource) {
	simulator.Map.WithLock(cluster, func() {
		var cpu int32
		var mem int64
		var cores, threads int16
		for _, ref := range cluster.Host {
			hs, ok := simulator.Map.Get(ref).(*simulator.HostSystem)
			if !ok || hs.Hardware == nil {
				continue
			}
			cpu += int32(hs.Hardware.CpuInfo.NumCpuCores) * int32(hs.Hardware.CpuInfo.Hz/1000000)
			mem += hs.Hardware.MemorySize
			cores += hs.Hardware.CpuInfo.NumCpuCores
			threads += hs.Hardware.CpuInfo.NumCpuThreads
		}
		if s, ok := cluster.Summary.(*types.ClusterComputeResourceSummary); ok {
			s.TotalCpu, s.EffectiveCpu = cpu, cpu
			s.TotalMemory = mem
			s.EffectiveMemory = mem >> 20 // effectiveMemory is in MB (ComputeResourceSummary)
			s.NumCpuCores, s.NumCpuThreads = cores, threads
			s.NumHosts = int32(len(cluster.Host))
			s.NumEffectiveHosts = int32(len(cluster.Host))
		}
		// The root pool's own configuration names the pool itself (ResourceConfigSpec.entity),
		// not the simulator's template pool "ha-root-pool".
		if cluster.ResourcePool != nil {
			if rp, ok := simulator.Map.Get(*cluster.ResourcePool).(*simulator.ResourcePool); ok {
				self := rp.Self
				rp.Config.Entity = &self
				if s := rp.Summary.GetResourcePoolSummary(); s != nil {
					s.Config.Entity = &self
				}
			}
		}
		if cfg, ok := cluster.ConfigurationEx.(*types.ClusterConfigInfoEx); ok {
			cfg.DrsConfig.Enabled = types.NewBool(false)
			cfg.VsanConfigInfo = &types.VsanClusterConfigInfo{
				Enabled:       types.NewBool(false),
				DefaultConfig: &types.VsanClusterConfigInfoHostDefaultInfo{AutoClaimStorage: types.NewBool(false)},
			}
		}
	})
}

// answerRead answers the read-only calls on the cluster the simulator does not
// implement; false: not one of them.
func answerRead(w http.ResponseWriter, method *simulator.Method) bool {
	if _, ok := method.Body.(*types.GetResourceUsage); !ok {
		return false
	}
	cluster, ok := simulator.Map.Get(method.This).(*simulator.ClusterComputeResource)
	if !ok {
		return false
	}
	writeResult(w, "GetResourceUsage", types.GetResourceUsageResponse{Returnval: clusterUsage(cluster)})
	return true
}

// clusterUsage is ClusterComputeResource.GetResourceUsage (vSphere API 6.0+):
// capacity from the cluster's summary, memory used as the reservations of its
// powered-on VMs (passthrough VMs lock all their memory), storage from the
// datastores its hosts mount. CPU use is not simulated (0 MHz).
func clusterUsage(cluster *simulator.ClusterComputeResource) types.ClusterResourceUsageSummary {
	var out types.ClusterResourceUsageSummary
	simulator.Map.WithLock(cluster, func() {
		if s, ok := cluster.Summary.(*types.ClusterComputeResourceSummary); ok {
			out.CpuCapacityMHz = s.TotalCpu
			out.MemCapacityMB = int32(s.TotalMemory >> 20)
		}
	})
	seen := map[types.ManagedObjectReference]bool{}
	for _, ref := range cluster.Host {
		hs, ok := simulator.Map.Get(ref).(*simulator.HostSystem)
		if !ok {
			continue
		}
		for _, vm := range vmsOn(hs) {
			if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && vm.Config != nil &&
				vm.Config.MemoryAllocation != nil && vm.Config.MemoryAllocation.Reservation != nil {
				out.MemUsedMB += int32(*vm.Config.MemoryAllocation.Reservation)
			}
		}
		for _, dsRef := range hs.Datastore {
			if seen[dsRef] {
				continue
			}
			seen[dsRef] = true
			if ds, ok := simulator.Map.Get(dsRef).(*simulator.Datastore); ok {
				out.StorageCapacityMB += ds.Summary.Capacity >> 20
				out.StorageUsedMB += (ds.Summary.Capacity - ds.Summary.FreeSpace) >> 20
			}
		}
	}
	return out
}

// writeResult writes a SOAP response whose body is `res` (a types.<Method>Response).
func writeResult(w http.ResponseWriter, method string, res interface{}) {
	body, err := xml.Marshal(res)
	if err != nil {
		writeSoapFault(w, "SystemError", err.Error())
		return
	}
	open := "<" + method + "Response>"
	text := strings.Replace(string(body), open, "<"+method+`Response xmlns="urn:vim25">`, 1)
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"`+
		` xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"`+
		` xmlns:xsd="http://www.w3.org/2001/XMLSchema"`+
		` xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`+
		`<soapenv:Body>%s</soapenv:Body></soapenv:Envelope>`, text)
}
