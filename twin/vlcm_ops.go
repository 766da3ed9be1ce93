package main

// The vLCM operations of the Automation API, one function per operation, registered by the table
// below, as govmomi's simulator gives each SOAP call a method. Each function's comment names the
// operation as the vSphere Automation API reference lists it (service and operation, and its REST
// form under /api, as the request metadata of Broadcom's vSphere Automation SDK for Python,
// `vmware-vcenter`, gives it: com/vmware/esx/settings/*_client.py) and what of the reference it
// models. The state they read and change, and the values they answer, are vlcm.go's; apply's
// remediation is vlcm_apply.go's.

import (
	"sort"
	"strconv"
	"time"
)

const (
	vlcmSoftware      = "com.vmware.esx.settings.clusters.software"
	vlcmDraftSoftware = vlcmSoftware + ".drafts.software"
	vlcmDepot         = "com.vmware.esx.settings.depot_content"
)

// vlcmOp is one operation: its vAPI service and operation ids and its handler. Unless
// `ownLock`, the handler runs holding the twin's lock on the desired states (see locked).
type vlcmOp struct {
	service, operation string
	handler            vapiHandler
	ownLock            bool
}

// vlcmOps is every vLCM operation the twin serves.
var vlcmOps = []vlcmOp{
	{service: vlcmSoftware, operation: "get", handler: softwareGet},
	{service: vlcmSoftware, operation: "scan$task", handler: softwareScan},
	{service: vlcmSoftware, operation: "apply$task", handler: applyTask, ownLock: true},
	{service: vlcmSoftware + ".compliance", operation: "get", handler: complianceGet},
	{service: vlcmSoftware + ".commits", operation: "get", handler: commitsGet},
	{service: vlcmSoftware + ".drafts", operation: "create", handler: draftsCreate},
	{service: vlcmSoftware + ".drafts", operation: "get", handler: draftsGet},
	{service: vlcmSoftware + ".drafts", operation: "list", handler: draftsList},
	{service: vlcmSoftware + ".drafts", operation: "delete", handler: draftsDelete},
	{service: vlcmSoftware + ".drafts", operation: "commit$task", handler: draftsCommit},
	{service: vlcmDraftSoftware + ".base_image", operation: "get", handler: draftBaseImageGet},
	{service: vlcmDraftSoftware + ".base_image", operation: "set", handler: draftBaseImageSet},
	{service: vlcmDraftSoftware + ".components", operation: "list", handler: draftComponentsList},
	{service: vlcmDraftSoftware + ".components", operation: "set", handler: draftComponentsSet},
	{service: vlcmDraftSoftware + ".components", operation: "delete", handler: draftComponentsDelete},
	{service: vlcmDraftSoftware + ".components", operation: "update", handler: draftComponentsUpdate},
	{service: vlcmDepot + ".base_images", operation: "list", handler: depotBaseImagesList},
	{service: vlcmDepot + ".components", operation: "list", handler: depotComponentsList},
}

func init() {
	for _, op := range vlcmOps {
		h := op.handler
		if !op.ownLock {
			h = locked(h)
		}
		vapiOps[op.service+" "+op.operation] = h
	}
}

// locked runs a vLCM operation holding the twin's lock on the desired states: vAPI calls come
// in on concurrent connections, and each reads or changes clusters' images, drafts and commits.
func locked(op vapiHandler) vapiHandler {
	return func(c *vapiCall) (interface{}, *vapiErr) {
		vlcm.Lock()
		defer vlcm.Unlock()
		return op(c)
	}
}

// softwareGet is com.vmware.esx.settings.clusters.Software.get (GET
// /api/esx/settings/clusters/{cluster}/software): the latest commit's desired state; NotFound
// where the cluster is managed by baselines ("if desired software document is not found").
func softwareGet(c *vapiCall) (interface{}, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	return softwareInfo(ci.latest().Image), nil
}

// softwareScan is com.vmware.esx.settings.clusters.Software.scan$task (POST
// /api/esx/settings/clusters/{cluster}/software?action=scan&vmw-task=true): a task that checks
// every host of the cluster against the latest commit; its result is a ClusterCompliance, which
// compliance get reads afterwards.
func softwareScan(c *vapiCall) (interface{}, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	return startVapiTask(c, ci.ref, "Check compliance", vlcmScanS, func(t *vapiTask) (interface{}, *vapiErr) {
		vlcm.Lock()
		defer vlcm.Unlock()
		ci.lastScan = clusterCompliance(ci)
		return ci.lastScan, nil
	}), nil
}

// complianceGet is com.vmware.esx.settings.clusters.software.Compliance.get (GET
// /api/esx/settings/clusters/{cluster}/software/compliance): the last scan's ClusterCompliance;
// NotFound before any scan ("if the compliance information is unavailable").
func complianceGet(c *vapiCall) (interface{}, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	if ci.lastScan == nil {
		return nil, verr("not_found", "No compliance information for cluster %s: scan it first.", ci.ref.Value)
	}
	return ci.lastScan, nil
}

// commitsGet is com.vmware.esx.settings.clusters.software.Commits.get (GET
// /api/esx/settings/clusters/{cluster}/software/commits/{commit}): a commit's Info (author,
// commit_time, description, apply_status APPLIED once every host complied); NotFound for an
// unknown commit.
func commitsGet(c *vapiCall) (interface{}, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	for _, m := range ci.commits {
		if m.ID == inStr(c.In["commit"]) {
			status := "NOT_APPLIED"
			if m.Applied {
				status = "APPLIED"
			}
			return st("com.vmware.esx.settings.clusters.software.commits.info", obj{"author": m.Author,
				"commit_time": vtime(m.Time), "description": m.Description, "apply_status": status}), nil
		}
	}
	return nil, verr("not_found", "There is no commit %s for cluster %s.", inStr(c.In["commit"]), ci.ref.Value)
}

// draftsCreate is com.vmware.esx.settings.clusters.software.Drafts.create (POST
// /api/esx/settings/clusters/{cluster}/software/drafts): a working copy of the latest desired
// state, its id answered; AlreadyExists "if there is already a draft created by this user".
func draftsCreate(c *vapiCall) (interface{}, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	for _, d := range ci.drafts {
		if d.Owner == c.User {
			return nil, verr("already_exists", "There is already a draft %s created by %s.", d.ID, c.User)
		}
	}
	vlcm.nextID++
	d := &vlcmDraft{ID: strconv.Itoa(vlcm.nextID), Owner: c.User, Created: time.Now(), Image: ci.latest().Image.copy()}
	ci.drafts[d.ID] = d
	return d.ID, nil
}

// draftMeta is a draft's Drafts.MetadataInfo: owner, status (VALID unless its document fails
// the depot's validation) and creation time.
func draftMeta(d *vlcmDraft) obj {
	status := "VALID"
	if validateImage(d.Image) != nil {
		status = "INVALID"
	}
	return st("com.vmware.esx.settings.clusters.software.drafts.metadata", obj{"owner": d.Owner,
		"status": status, "creation_time": vtime(d.Created)})
}

// draftsGet is com.vmware.esx.settings.clusters.software.Drafts.get (GET
// /api/esx/settings/clusters/{cluster}/software/drafts/{draft}): its metadata and its software.
func draftsGet(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	return st("com.vmware.esx.settings.clusters.software.drafts.info", obj{"metadata": draftMeta(d),
		"software": softwareInfo(d.Image), "display_name": opt(nil)}), nil
}

// draftsList is com.vmware.esx.settings.clusters.software.Drafts.list (GET
// /api/esx/settings/clusters/{cluster}/software/drafts): draft id -> Summary (its metadata).
func draftsList(c *vapiCall) (interface{}, *vapiErr) {
	ci, e := clusterOf(c)
	if e != nil {
		return nil, e
	}
	m := map[string]interface{}{}
	for id, d := range ci.drafts {
		m[id] = st("com.vmware.esx.settings.clusters.software.drafts.summary", obj{"metadata": draftMeta(d)})
	}
	return vmap(m), nil
}

// draftsDelete is com.vmware.esx.settings.clusters.software.Drafts.delete (DELETE
// /api/esx/settings/clusters/{cluster}/software/drafts/{draft}); NotFound for an unknown draft.
func draftsDelete(c *vapiCall) (interface{}, *vapiErr) {
	ci, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	delete(ci.drafts, d.ID)
	return nil, nil
}

// draftsCommit is com.vmware.esx.settings.clusters.software.Drafts.commit$task (POST
// /api/esx/settings/clusters/{cluster}/software/drafts/{draft}?action=commit&vmw-task=true):
// the draft's document validated against the depot (InvalidArgument "if validation of the
// software document fails"), then a new commit, the latest desired state, and the draft gone;
// NotAllowedInCurrentState while a remediation runs.
func draftsCommit(c *vapiCall) (interface{}, *vapiErr) {
	ci, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	if ci.applying {
		return nil, verr("not_allowed_in_current_state", "Another operation is in progress on cluster %s.", ci.ref.Value)
	}
	if e := validateImage(d.Image); e != nil {
		return nil, e
	}
	delete(ci.drafts, d.ID)
	vlcm.nextID++
	commit := &vlcmCommit{ID: strconv.Itoa(vlcm.nextID), Author: c.User, Time: time.Now(),
		Description: "Draft " + d.ID + " committed", Image: d.Image.copy()}
	ci.commits = append(ci.commits, commit)
	return startVapiTask(c, ci.ref, "Commit draft", vlcmCommitS, func(t *vapiTask) (interface{}, *vapiErr) {
		return commit.ID, nil
	}), nil
}

// draftBaseImageGet is com.vmware.esx.settings.clusters.software.drafts.software.BaseImage.get
// (GET /api/esx/settings/clusters/{cluster}/software/drafts/{draft}/software/base-image).
func draftBaseImageGet(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	return baseImageInfo(d.Image.Base), nil
}

// draftBaseImageSet is com.vmware.esx.settings.clusters.software.drafts.software.BaseImage.set
// (PUT /api/esx/settings/clusters/{cluster}/software/drafts/{draft}/software/base-image):
// BaseImageSpec.version, required; the depot is consulted at commit, not here.
func draftBaseImageSet(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	_, spec := unStruct(c.In["spec"])
	v := inStr(spec["version"])
	if v == "" {
		return nil, verr("invalid_argument", "spec.version is required.")
	}
	d.Image.Base = v
	return nil, nil
}

// draftComponentsList is com.vmware.esx.settings.clusters.software.drafts.software.Components.list
// (GET /api/esx/settings/clusters/{cluster}/software/drafts/{draft}/software/components):
// component name -> ComponentInfo.
func draftComponentsList(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	m := map[string]interface{}{}
	for n, v := range d.Image.Components {
		m[n] = componentInfo(n, v)
	}
	return vmap(m), nil
}

// draftComponentsSet is com.vmware.esx.settings.clusters.software.drafts.software.Components.set
// (PUT /api/esx/settings/clusters/{cluster}/software/drafts/{draft}/software/components/{component}):
// the component at `version`, or at the depot's latest version where none is given.
func draftComponentsSet(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	n := inStr(c.In["component"])
	d.Image.Components[n] = orDefault(inStr(c.In["version"]), latestVersion(n))
	return nil, nil
}

// draftComponentsDelete is com.vmware.esx.settings.clusters.software.drafts.software.Components.delete
// (DELETE /api/esx/settings/clusters/{cluster}/software/drafts/{draft}/software/components/{component}).
func draftComponentsDelete(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	delete(d.Image.Components, inStr(c.In["component"]))
	return nil, nil
}

// draftComponentsUpdate is com.vmware.esx.settings.clusters.software.drafts.software.Components.update
// (PATCH /api/esx/settings/clusters/{cluster}/software/drafts/{draft}/software/components):
// UpdateSpec.components_to_set (name -> version, unset: the depot's latest) and
// components_to_delete.
func draftComponentsUpdate(c *vapiCall) (interface{}, *vapiErr) {
	_, d, e := draftOf(c)
	if e != nil {
		return nil, e
	}
	_, spec := unStruct(c.In["spec"])
	for n, v := range inMap(spec["components_to_set"]) {
		d.Image.Components[n] = orDefault(inStr(v), latestVersion(n))
	}
	for _, n := range inStrings(spec["components_to_delete"]) {
		delete(d.Image.Components, n)
	}
	return nil, nil
}

// depotBaseImagesList is com.vmware.esx.settings.depot_content.BaseImages.list (GET
// /api/esx/settings/depot-content/base-images): the depot's base images, oldest first, each a
// BaseImages.Summary (display version, release date), what a draft may name.
func depotBaseImagesList(c *vapiCall) (interface{}, *vapiErr) {
	versions := make([]string, 0, len(vlcm.baseImages))
	for v := range vlcm.baseImages {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return vibVersionLess(versions[i], versions[j]) })
	out := []interface{}{}
	for _, v := range versions {
		display, release := baseImageDisplay(v)
		out = append(out, st("com.vmware.esx.settings.depot_content.base_images.summary", obj{
			"display_name": "ESXi", "version": v, "display_version": display,
			"summary": "ESXi " + v, "category": "ENHANCEMENT", "kb": "about:blank",
			"release_date": release, "quick_patch_compatible_versions": opt(nil)}))
	}
	return out, nil
}

// depotComponentsList is com.vmware.esx.settings.depot_content.Components.list (GET
// /api/esx/settings/depot-content/components): the depot's components by name (FilterSpec.names
// narrows them), each with its versions oldest first (ComponentVersionSummary).
func depotComponentsList(c *vapiCall) (interface{}, *vapiErr) {
	_, filter := unStruct(c.In["filter"])
	names := filterSet(filter, "names")
	keys := make([]string, 0, len(vlcm.components))
	for n := range vlcm.components {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	out := []interface{}{}
	for _, n := range keys {
		if names != nil && !names[n] {
			continue
		}
		var versions []string
		vendor, display := "", n
		for v, comp := range vlcm.components[n] {
			versions = append(versions, v)
			vendor, display = orDefault(comp.Vendor, "NVD"), orDefault(comp.DisplayName, n)
		}
		sort.Slice(versions, func(i, j int) bool { return vibVersionLess(versions[i], versions[j]) })
		list := []interface{}{}
		for _, v := range versions {
			list = append(list, st("com.vmware.esx.settings.depot_content.components.component_version_summary", obj{
				"version": v, "display_version": orDefault(vlcm.components[n][v].DisplayVersion, v),
				"summary": n + " " + v, "category": "ENHANCEMENT", "urgency": "GENERAL", "kb": "about:blank",
				"release_date": vtime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))}))
		}
		out = append(out, st("com.vmware.esx.settings.depot_content.components.summary", obj{
			"name": n, "display_name": display, "vendor": vendor, "versions": list}))
	}
	return out, nil
}
