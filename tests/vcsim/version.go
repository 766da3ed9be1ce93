package main

import (
	"fmt"
	"net/http"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
)

// The twin stands for vCenter Server 7.0.3 (7.0 U3c, build 19234570, the
// release that manages ESXi 7.0 U3c build 19193900), not the 6.5 govmomi 0.24
// ships. AboutInfo.apiVersion is what a client negotiates with: pyVmomi's
// SmartConnect reads /sdk/vimServiceVersions.xml and speaks the newest
// namespace both sides know, so 7.0-only properties (HostCapability
// .deviceRebindWithoutRebootSupported, HostPciPassthruConfig.applyNow) travel.
const (
	vcenterVersion = "7.0.3"
	vcenterBuild   = "19234570"
	vimAPIVersion  = "7.0.3.0"
)

func setVcenterVersion() {
	si := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
	about := &si.Content.About
	about.Version = vcenterVersion
	about.Build = vcenterBuild
	about.ApiVersion = vimAPIVersion
	// AboutInfo.licenseProductVersion: the license's product version, 7.0 for vCenter 7.0.x.
	about.LicenseProductVersion = "7.0"
	about.FullName = fmt.Sprintf("VMware vCenter Server %s build-%s", vcenterVersion, vcenterBuild)
}

// serviceVersions answers /sdk/vimServiceVersions.xml for API 7.0.3.0 and the
// versions a 7.0.3 vCenter still accepts.
func serviceVersions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8" ?>
<namespaces version="1.0">
 <namespace>
  <name>urn:%s</name>
  <version>%s</version>
  <priorVersions>
   <version>7.0.2.0</version>
   <version>7.0.1.0</version>
   <version>7.0.0.0</version>
   <version>6.7.3</version>
   <version>6.7</version>
   <version>6.5</version>
   <version>6.0</version>
  </priorVersions>
 </namespace>
</namespaces>
`, vim25.Namespace, vimAPIVersion)
}
