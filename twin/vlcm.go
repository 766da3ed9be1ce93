package main

// vSphere Lifecycle Manager (vLCM) for clusters managed by a single image, as the Automation API
// serves it (com.vmware.esx.settings, vSphere API 7.0.0.0+; the services and their types are
// those of Broadcom's vSphere Automation SDK for Python, com/vmware/esx/settings/*_client.py):
//
//   - clusters.software get: the cluster's desired state (base image, components);
//     NotFound where the cluster is managed by baselines ("desired software document is not
//     found");
//   - clusters.software.drafts create / get / list / delete, drafts.software.base_image set|get,
//     drafts.software.components set|update|delete|list, drafts commit$task: a draft is a working
//     copy of the desired state; one per user (AlreadyExists); committing it validates the
//     document against the depot (InvalidArgument when a base image or component version is not
//     in it) and makes a new commit, the latest desired state; earlier commits are kept
//     (clusters.software.commits get);
//   - clusters.software scan$task and clusters.software.compliance get: compliance per host
//     against the latest commit, with its impact (REBOOT_REQUIRED for an image or driver change);
//   - clusters.software apply$task (ApplySpec: hosts, a subset; commit; accept_eula): hosts are
//     remediated one after another (vLCM's default, sequential remediation). A host already
//     compliant is skipped. A host not in maintenance mode is put there by vLCM, which cannot
//     happen while it runs powered-on VMs that cannot be migrated: the default remediation
//     policy, pre_remediation_power_action DO_NOT_CHANGE_VMS_POWER_STATE, leaves them as they
//     are, and passthrough VMs cannot move (nor can any VM here: DRS is off), so that host fails
//     (VMware vSphere Lifecycle Manager documentation, "Remediating a Cluster Against a Single
//     Image" and "Configuring the vSphere Lifecycle Manager Remediation Settings"; API
//     com.vmware.esx.settings.clusters.policies.apply: pre_remediation_power_action). Then the
//     new image is installed, the host reboots (reboot.go: connected, notResponding, a later
//     bootTime), and the image runs: `esxcli software vib list`, `esxcli system version get` and
//     the HostSystem's config.product read the new versions (hostsoftware.go, bootImage). A host
//     vLCM put in maintenance mode leaves it at the end; one already there stays.
//
// The host's image is read from its VIB list (hostsoftware.go), the same list esxcli shows: the
// base image is the esx-base VIB's version, a component is present where its VIBs are.
//
// This file holds vLCM's state (the depot, each cluster's commits and drafts), how a host's image
// is read and installed, and the values the operations answer. The operations themselves are in
// vlcm_ops.go, one function each, registered by its table; apply's remediation is vlcm_apply.go.

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// VlcmDesc is the description's vlcm block.
type VlcmDesc struct {
	// ImageManaged: the cluster is managed by a single image. Unset: by an image where vCenter
	// is 8.x, by baselines on 7.0.3 (vSphere 8 creates clusters managed by an image; 7.0
	// clusters use baselines unless converted).
	ImageManaged *bool `json:"image_managed"`
	// The depot's base images and components beyond those the hosts run.
	BaseImages []BaseImageDesc `json:"base_images"`
	Components []ComponentDesc `json:"components"`
}

// BaseImageDesc is an ESXi base image in the depot: its version is the esx-base VIB's
// (e.g. 8.0.3-0.35.24280767), display version as vSphere shows it (8.0 U3b).
type BaseImageDesc struct {
	Version        string `json:"version"`
	DisplayVersion string `json:"display_version"`
	ReleaseDate    string `json:"release_date"` // YYYY-MM-DD
}

// ComponentDesc is a component in the depot: a name, a version and the VIBs it installs (each
// at the component's version; by default one VIB of the component's name).
type ComponentDesc struct {
	Name           string   `json:"name"`
	Version        string   `json:"version"`
	DisplayName    string   `json:"display_name"`
	DisplayVersion string   `json:"display_version"`
	Vendor         string   `json:"vendor"`
	VIBs           []string `json:"vibs"`
}

func (c ComponentDesc) vibs() []string {
	if len(c.VIBs) > 0 {
		return c.VIBs
	}
	return []string{c.Name}
}

// hostImage is an image: a base image version and component versions.
type hostImage struct {
	Base       string
	Components map[string]string
}

func (im hostImage) copy() hostImage {
	c := hostImage{Base: im.Base, Components: map[string]string{}}
	for k, v := range im.Components {
		c.Components[k] = v
	}
	return c
}

type vlcmCommit struct {
	ID, Author, Description string
	Time                    time.Time
	Image                   hostImage
	Applied                 bool
}

type vlcmDraft struct {
	ID, Owner string
	Created   time.Time
	Image     hostImage
}

type clusterImage struct {
	ref      types.ManagedObjectReference
	commits  []*vlcmCommit
	drafts   map[string]*vlcmDraft
	lastScan obj
	applying bool
}

var vlcm = struct {
	sync.Mutex
	managed    bool
	clusters   map[string]*clusterImage
	baseImages map[string]BaseImageDesc
	components map[string]map[string]ComponentDesc // name -> version -> component
	nextID     int
}{clusters: map[string]*clusterImage{}, baseImages: map[string]BaseImageDesc{},
	components: map[string]map[string]ComponentDesc{}}

// baseVIBs are the base image's own VIBs (VMware's), not components.
func isBaseVIB(v VIB) bool { return v.Vendor == "VMware" || v.Vendor == "VMW" }

// knownDisplay: ESXi release names of the builds the twin knows (ESXi release notes).
var knownDisplay = map[string][2]string{
	"19193900": {"7.0 U3c", "2022-01-27"},
	"24022510": {"8.0 U3", "2024-06-25"},
}

// setupVlcm builds the depot and each cluster's first commit, the image of its first host (vLCM
// "import an image from a reference host" when a cluster starts to be managed by an image).
func setupVlcm(desc *Description, release string) {
	vlcm.Lock()
	defer vlcm.Unlock()
	vlcm.managed = strings.HasPrefix(release, "8.")
	if desc.Vlcm.ImageManaged != nil {
		vlcm.managed = *desc.Vlcm.ImageManaged
	}
	for _, b := range desc.Vlcm.BaseImages {
		vlcm.baseImages[b.Version] = b
	}
	for _, c := range desc.Vlcm.Components {
		addComponent(c)
	}
	// What the hosts run is in the depot too.
	for _, ref := range simulator.Map.All("HostSystem") {
		hs := ref.(*simulator.HostSystem)
		inboxOf(hs) // the base image's own VIBs, as built
		for _, v := range softwareOf(hs) {
			if v.Name == "esx-base" {
				if _, ok := vlcm.baseImages[v.Version]; !ok {
					build := v.Version[strings.LastIndex(v.Version, ".")+1:]
					d := knownDisplay[build]
					vlcm.baseImages[v.Version] = BaseImageDesc{Version: v.Version,
						DisplayVersion: orDefault(d[0], v.Version), ReleaseDate: orDefault(d[1], "2022-01-27")}
				}
			} else if !isBaseVIB(v) {
				// The version a host runs is in the depot, under the component that installs
				// its VIB (a component of that VIB's name where the description names none).
				name := componentOfVIB(v.Name)
				if name == "" {
					addComponent(ComponentDesc{Name: v.Name, Version: v.Version, Vendor: v.Vendor})
				} else if _, ok := vlcm.components[name][v.Version]; !ok {
					for _, known := range vlcm.components[name] {
						known.Version, known.DisplayVersion = v.Version, ""
						addComponent(known)
						break
					}
				}
			}
		}
	}
	if !vlcm.managed {
		return
	}
	for _, ref := range simulator.Map.All("ClusterComputeResource") {
		cl := ref.(*simulator.ClusterComputeResource)
		ci := &clusterImage{ref: cl.Self, drafts: map[string]*vlcmDraft{}}
		im, from := hostImage{Components: map[string]string{}}, "no host"
		if len(cl.Host) > 0 {
			if hs := hostByMoid(cl.Host[0].Value); hs != nil {
				im, from = imageOf(hs), "host "+hs.Name
			}
		}
		vlcm.nextID++
		ci.commits = append(ci.commits, &vlcmCommit{ID: strconv.Itoa(vlcm.nextID), Author: "vpxd",
			Description: "Image imported from " + from, Time: time.Now(), Image: im, Applied: true})
		vlcm.clusters[cl.Self.Value] = ci
	}
}

func addComponent(c ComponentDesc) {
	if vlcm.components[c.Name] == nil {
		vlcm.components[c.Name] = map[string]ComponentDesc{}
	}
	vlcm.components[c.Name][c.Version] = c
}

// componentOfVIB names the depot component that installs this VIB ("" for none).
func componentOfVIB(vib string) string {
	names := make([]string, 0, len(vlcm.components))
	for n := range vlcm.components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, c := range vlcm.components[n] {
			for _, v := range c.vibs() {
				if v == vib {
					return n
				}
			}
		}
	}
	return ""
}

// imageOf reads a host's image from its VIB list (call with vlcm locked).
func imageOf(hs *simulator.HostSystem) hostImage {
	im := hostImage{Components: map[string]string{}}
	for _, v := range softwareOf(hs) {
		if v.Name == "esx-base" {
			im.Base = v.Version
		} else if !isBaseVIB(v) {
			if n := componentOfVIB(v.Name); n != "" {
				im.Components[n] = v.Version
			}
		}
	}
	return im
}

// imageVIBs is the host's VIB list once `target` is installed: esx-base at the base image's
// version, the base image's own (inbox) VIBs except those a component replaces (an async
// nmlx5 driver replaces the inbox one; removing the component brings the inbox one back), each
// component's VIBs at its version, and VIBs no depot component knows left as they are.
// Call with vlcm locked.
func imageVIBs(hs *simulator.HostSystem, target hostImage) []VIB {
	today := time.Now().UTC().Format("2006-01-02")
	current := softwareOf(hs)
	provided := map[string]bool{}
	for n, version := range target.Components {
		for _, vib := range vlcm.components[n][version].vibs() {
			provided[vib] = true
		}
	}
	var out []VIB
	for _, v := range inboxOf(hs) {
		if v.Name == "esx-base" {
			if v.Version != target.Base {
				v.Version, v.InstallDate = target.Base, today
			}
			out = append(out, v)
		} else if !provided[v.Name] {
			out = append(out, v)
		}
	}
	for _, v := range current {
		if !isBaseVIB(v) && componentOfVIB(v.Name) == "" && !provided[v.Name] {
			out = append(out, v)
		}
	}
	names := make([]string, 0, len(target.Components))
	for n := range target.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		version := target.Components[n]
		c := vlcm.components[n][version]
		for _, vib := range c.vibs() {
			installed := today
			for _, v := range current {
				if v.Name == vib && v.Version == version {
					installed = v.InstallDate
				}
			}
			out = append(out, VIB{Name: vib, Version: version, Vendor: orDefault(c.Vendor, "NVD"),
				AcceptanceLevel: "VMwareAccepted", InstallDate: installed})
		}
	}
	return out
}

// inboxVIBs: host moid -> the base image's own VIBs as the host was built (VMware's).
var inboxVIBs sync.Map

// inboxOf is the host's inbox VIBs, with esx-base as it runs now.
func inboxOf(hs *simulator.HostSystem) []VIB {
	v, ok := inboxVIBs.Load(hs.Self.Value)
	if !ok {
		var base []VIB
		for _, vib := range softwareOf(hs) {
			if isBaseVIB(vib) {
				base = append(base, vib)
			}
		}
		inboxVIBs.Store(hs.Self.Value, base)
		v = base
	}
	out := append([]VIB(nil), v.([]VIB)...)
	for i := range out {
		if out[i].Name == "esx-base" {
			for _, cur := range softwareOf(hs) {
				if cur.Name == "esx-base" {
					out[i] = cur
				}
			}
		}
	}
	return out
}

func (ci *clusterImage) latest() *vlcmCommit { return ci.commits[len(ci.commits)-1] }

// clusterOf finds a cluster managed by an image: NotFound for an unknown one, and for one
// managed by baselines.
func clusterOf(c *vapiCall) (*clusterImage, *vapiErr) {
	id := inStr(c.In["cluster"])
	ci := vlcm.clusters[id]
	if ci == nil {
		if cl, ok := simulator.Map.Get(types.ManagedObjectReference{Type: "ClusterComputeResource", Value: id}).(*simulator.ClusterComputeResource); ok && cl != nil {
			return nil, verr("not_found", "The cluster %s is not managed by a single image: desired software document is not found.", id)
		}
		return nil, verr("not_found", "There is no cluster %s in the system.", id)
	}
	return ci, nil
}

func draftOf(c *vapiCall) (*clusterImage, *vlcmDraft, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, nil, e
	}
	d := ci.drafts[inStr(c.In["draft"])]
	if d == nil {
		return nil, nil, verr("not_found", "There is no draft %s for cluster %s.", inStr(c.In["draft"]), ci.ref.Value)
	}
	return ci, d, nil
}

// --- values ---

// baseImageDisplay is how vSphere shows a base image: its display version and release date.
func baseImageDisplay(version string) (string, string) {
	b := vlcm.baseImages[version]
	release, err := time.Parse("2006-01-02", b.ReleaseDate)
	if err != nil {
		release = time.Date(2022, 1, 27, 0, 0, 0, 0, time.UTC)
	}
	return orDefault(b.DisplayVersion, version), vtime(release)
}

func baseImageInfo(version string) obj {
	display, release := baseImageDisplay(version)
	return st("com.vmware.esx.settings.base_image_info", obj{"version": version,
		"details": opt(st("com.vmware.esx.settings.base_image_details", obj{"display_name": "ESXi",
			"display_version": display, "release_date": release,
			"quick_patch_compatible_versions": opt(nil)}))})
}

func componentInfo(name, version string) obj {
	c := vlcm.components[name][version]
	return st("com.vmware.esx.settings.component_info", obj{"version": opt(version),
		"details": opt(st("com.vmware.esx.settings.component_details", obj{
			"display_name": orDefault(c.DisplayName, name), "vendor": orDefault(c.Vendor, "NVD"),
			"display_version": opt(orDefault(c.DisplayVersion, version))}))})
}

func softwareInfo(im hostImage) obj {
	comps := map[string]interface{}{}
	for n, v := range im.Components {
		comps[n] = componentInfo(n, v)
	}
	return st("com.vmware.esx.settings.software_info", obj{"base_image": baseImageInfo(im.Base),
		"add_on": opt(nil), "components": vmap(comps), "solutions": vmap(nil),
		"hardware_support": opt(nil), "removed_components": opt(nil), "alternative_images": opt(nil)})
}

func notifications() obj {
	return st("com.vmware.esx.settings.notifications", obj{"info": opt(nil), "warnings": opt(nil), "errors": opt(nil)})
}

func notificationsWith(kind, id, text string) obj {
	n := st("com.vmware.esx.settings.notification", obj{"type": opt(strings.ToUpper(kind)), "id": id,
		"time": vtime(time.Now()), "message": message(id, text), "resolution": opt(nil),
		"originator": opt(nil), "retriable": opt(nil)})
	f := obj{"info": opt(nil), "warnings": opt(nil), "errors": opt(nil)}
	f[kind] = opt([]interface{}{n})
	return st("com.vmware.esx.settings.notifications", f)
}

func hostInfoMap(hosts []*simulator.HostSystem) []interface{} {
	m := map[string]interface{}{}
	for _, hs := range hosts {
		m[hs.Self.Value] = st("com.vmware.esx.settings.host_info", obj{"name": hs.Name, "is_vsan_witness": opt(nil)})
	}
	return vmap(m)
}

func clusterHosts(ci *clusterImage) []*simulator.HostSystem {
	var out []*simulator.HostSystem
	if cl, ok := simulator.Map.Get(ci.ref).(*simulator.ClusterComputeResource); ok {
		for _, ref := range cl.Host {
			if hs := hostByMoid(ref.Value); hs != nil {
				out = append(out, hs)
			}
		}
	}
	return out
}

// hostCompliance is one host's compliance with `target` (ComplianceStatus, ComplianceImpact).
func hostCompliance(hs *simulator.HostSystem, target hostImage, commit string, now time.Time) (string, obj) {
	var connected bool
	simulator.Map.WithLock(hs, func() {
		connected = hs.Runtime.ConnectionState == types.HostSystemConnectionStateConnected
	})
	if !connected || availability.unavailable(hs.Self, nil) != "" {
		return "UNAVAILABLE", st("com.vmware.esx.settings.host_compliance", obj{"impact": "UNKNOWN",
			"status": "UNAVAILABLE", "stage_status": opt(nil), "scan_time": vtime(now), "commit": opt(commit),
			"notifications": notificationsWith("errors", "com.vmware.vcIntegrity.lifecycle.HostUnavailable",
				"Host "+hs.Name+" is not responding."),
			"base_image": st("com.vmware.esx.settings.base_image_compliance", obj{"status": "UNAVAILABLE",
				"stage_status": opt(nil), "current": baseImageInfo(target.Base), "target": baseImageInfo(target.Base),
				"notifications": notifications()}),
			"add_on":     addOnCompliance(),
			"components": vmap(nil), "solutions": vmap(nil), "hardware_support": opt(nil),
			"removed_components": opt(nil), "impact_details": opt(nil),
			"data_processing_units_compliance": opt(nil), "compliance_status_details": opt(nil),
			"remediation_details": opt(nil), "image": opt(nil), "host_hardware_details": opt(nil)})
	}
	current := imageOf(hs)
	status := "COMPLIANT"
	baseStatus := "COMPLIANT"
	if current.Base != target.Base {
		baseStatus, status = "NON_COMPLIANT", "NON_COMPLIANT"
	}
	comps := map[string]interface{}{}
	names := map[string]bool{}
	for n := range current.Components {
		names[n] = true
	}
	for n := range target.Components {
		names[n] = true
	}
	for n := range names {
		cur, hasCur := current.Components[n]
		tgt, hasTgt := target.Components[n]
		s := "COMPLIANT"
		if cur != tgt || hasCur != hasTgt {
			s, status = "NON_COMPLIANT", "NON_COMPLIANT"
		}
		entry := obj{"status": s, "stage_status": opt(nil), "current": opt(nil), "target": opt(nil),
			"current_source": opt(nil), "target_source": opt(nil), "notifications": notifications()}
		if hasCur {
			entry["current"], entry["current_source"] = opt(componentInfo(n, cur)), opt("USER")
		}
		if hasTgt {
			entry["target"], entry["target_source"] = opt(componentInfo(n, tgt)), opt("USER")
		}
		comps[n] = st("com.vmware.esx.settings.component_compliance", entry)
	}
	impact := "NO_IMPACT"
	if status != "COMPLIANT" {
		// A new base image or a driver component is installed in maintenance mode and runs
		// after a reboot (ComplianceImpact REBOOT_REQUIRED).
		impact = "REBOOT_REQUIRED"
	}
	return status, st("com.vmware.esx.settings.host_compliance", obj{"impact": impact, "status": status,
		"stage_status": opt(nil), "notifications": notifications(), "scan_time": vtime(now), "commit": opt(commit),
		"base_image": st("com.vmware.esx.settings.base_image_compliance", obj{"status": baseStatus,
			"stage_status": opt(nil), "current": baseImageInfo(current.Base), "target": baseImageInfo(target.Base),
			"notifications": notifications()}),
		"add_on":     addOnCompliance(),
		"components": vmap(comps), "solutions": vmap(nil), "hardware_support": opt(nil),
		"removed_components": opt(nil), "impact_details": opt(nil), "data_processing_units_compliance": opt(nil),
		"compliance_status_details": opt(nil), "remediation_details": opt(nil), "image": opt(nil),
		"host_hardware_details": opt(nil)})
}

func addOnCompliance() obj {
	return st("com.vmware.esx.settings.add_on_compliance", obj{"status": "COMPLIANT", "stage_status": opt(nil),
		"current": opt(nil), "target": opt(nil), "notifications": notifications()})
}

// clusterCompliance is ClusterCompliance for every host of the cluster against the latest commit.
func clusterCompliance(ci *clusterImage) obj {
	now := time.Now()
	latest := ci.latest()
	sets := map[string][]string{}
	hosts := map[string]interface{}{}
	all := clusterHosts(ci)
	worst := "COMPLIANT"
	for _, hs := range all {
		status, value := hostCompliance(hs, latest.Image, latest.ID, now)
		sets[status] = append(sets[status], hs.Self.Value)
		hosts[hs.Self.Value] = value
		if status != "COMPLIANT" && worst != "NON_COMPLIANT" {
			worst = status
		}
	}
	impact := "NO_IMPACT"
	if len(sets["NON_COMPLIANT"]) > 0 {
		impact = "REBOOT_REQUIRED"
	}
	return st("com.vmware.esx.settings.cluster_compliance", obj{"impact": impact, "status": worst,
		"stage_status": opt(nil), "notifications": notifications(), "scan_time": vtime(now),
		"commit": opt(latest.ID), "compliant_hosts": vset(sets["COMPLIANT"]),
		"non_compliant_hosts": vset(sets["NON_COMPLIANT"]), "incompatible_hosts": vset(sets["INCOMPATIBLE"]),
		"unavailable_hosts": vset(sets["UNAVAILABLE"]), "hosts": vmap(hosts), "host_info": hostInfoMap(all)})
}

// validate checks an image against the depot (drafts commit$task: InvalidArgument when
// "validation of the software document fails").
func validateImage(im hostImage) *vapiErr {
	if _, ok := vlcm.baseImages[im.Base]; !ok {
		return verr("invalid_argument", "Base image version %s is not found in the depot.", im.Base)
	}
	for n, v := range im.Components {
		if _, ok := vlcm.components[n][v]; !ok {
			return verr("invalid_argument", "Component %s(%s) is not found in the depot.", n, v)
		}
	}
	return nil
}

// latestVersion is the highest version of a component in the depot (Components.set without a
// version).
func latestVersion(name string) string {
	best := ""
	for v := range vlcm.components[name] {
		if v > best {
			best = v
		}
	}
	return best
}
