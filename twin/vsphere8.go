package main

import (
	"fmt"
	"sort"
	"strings"
)

// vCenter releases the twin can stand for (Description.VcenterVersion). Each is
// what that release's AboutInfo says and the API versions its
// /sdk/vimServiceVersions.xml lists:
//   - 7.0.3: vCenter Server 7.0 Update 3c, build 19234570, API 7.0.3.0 (VMware
//     vCenter Server 7.0 Update 3c release notes).
//   - 8.0.3: vCenter Server 8.0 Update 3, build 24022515, API 8.0.3.0 (VMware
//     vCenter Server 8.0 Update 3 release notes); licenseProductVersion 8.0. Its
//     prior versions are the API releases from 8.0.2.0 back to 6.0, among them
//     8.0.0.1, the release that brought vendor device groups (vSphere API
//     reference: ConfigTarget.vendorDeviceGroupInfo, VirtualMachineConfigSpec
//     .deviceGroups "Since vSphere API Release 8.0.0.1").
type vcRelease struct {
	Version string
	Build   string
	API     string
	License string
	Prior   []string
}

var vcReleases = map[string]vcRelease{
	"7.0.3": {
		Version: "7.0.3", Build: "19234570", API: "7.0.3.0", License: "7.0",
		Prior: []string{"7.0.2.0", "7.0.1.0", "7.0.0.0", "6.7.3", "6.7", "6.5", "6.0"},
	},
	"8.0.3": {
		Version: "8.0.3", Build: "24022515", API: "8.0.3.0", License: "8.0",
		Prior: []string{"8.0.2.0", "8.0.1.0", "8.0.0.2", "8.0.0.1", "8.0.0.0", "7.0.3.2",
			"7.0.3.1", "7.0.3.0", "7.0.2.0", "7.0.1.0", "7.0.0.0", "6.7.3", "6.7", "6.5", "6.0"},
	},
}

// activeRelease is the release this twin stands for (set once, before the rack is built).
var activeRelease = vcReleases["7.0.3"]

// selectRelease picks the description's release; "" is 7.0.3.
func selectRelease(version string) error {
	if version == "" {
		version = "7.0.3"
	}
	p, ok := vcReleases[version]
	if !ok {
		known := make([]string, 0, len(vcReleases))
		for k := range vcReleases {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Errorf("vcenter_version %q: the twin stands for vCenter %s", version,
			strings.Join(known, " or "))
	}
	activeRelease = p
	return nil
}

// speaksDeviceGroups: vCenter and host both at API 8.0.0.1 or later, the release
// that brought vendor device groups (vSphere API reference, VirtualMachineConfigSpec
// .deviceGroups and ConfigTarget.vendorDeviceGroupInfo, "Since 8.0.0.1").
func speaksDeviceGroups(hostVersion string) bool {
	return strings.HasPrefix(activeRelease.Version, "8.") && strings.HasPrefix(hostVersion, "8.")
}
