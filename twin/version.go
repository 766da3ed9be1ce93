package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
)

// The twin stands for a vCenter Server of one release, chosen by the rack
// description's vcenter_version (vsphere8.go lists the releases): 7.0.3 by
// default (7.0 U3c, build 19234570, the release that manages ESXi 7.0 U3c
// build 19193900), not the 6.5 govmomi 0.24 ships. AboutInfo.apiVersion is
// what a client negotiates with: pyVmomi's SmartConnect reads
// /sdk/vimServiceVersions.xml and speaks the newest namespace both sides know,
// so 7.0-only properties (HostCapability.deviceRebindWithoutRebootSupported,
// HostPciPassthruConfig.applyNow) travel, and on 8.0.3 the 8.0.0.1 ones
// (ConfigTarget.vendorDeviceGroupInfo) too.

func setVcenterVersion() {
	p := activeRelease
	si := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
	about := &si.Content.About
	about.Version = p.Version
	about.Build = p.Build
	about.ApiVersion = p.API
	// AboutInfo.licenseProductVersion: the license's product version (7.0 for 7.0.x, 8.0 for 8.0.x).
	about.LicenseProductVersion = p.License
	about.FullName = fmt.Sprintf("VMware vCenter Server %s build-%s", p.Version, p.Build)
}

// serviceVersions answers /sdk/vimServiceVersions.xml: the release's API version
// first, then the versions that release still accepts.
func serviceVersions(w http.ResponseWriter, _ *http.Request) {
	p := activeRelease
	var prior strings.Builder
	for _, v := range p.Prior {
		fmt.Fprintf(&prior, "   <version>%s</version>\n", v)
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8" ?>
<namespaces version="1.0">
 <namespace>
  <name>urn:%s</name>
  <version>%s</version>
  <priorVersions>
%s  </priorVersions>
 </namespace>
</namespaces>
`, vim25.Namespace, p.API, prior.String())
}
