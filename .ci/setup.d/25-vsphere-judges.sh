#!/usr/bin/env bash
# The judges of the rack twin: vSphere clients nobody on this project wrote. Ansible's
# community.vmware modules (PyPI's `ansible` package 12.3.0 ships community.vmware 5.10.0 on
# ansible-core 2.19), with pyVmomi and `requests`, which every community.vmware module imports.
# And Broadcom's vSphere Automation SDK for Python (PyPI `vmware-vcenter`, with
# vmware-vapi-runtime and vmware-vapi-common-client), which speaks vAPI JSON-RPC to /api: the
# judge of the twin's vLCM (tests/integration/test_twin_vlcm.py). rackcert's own host-image client
# (provision/host_image.py) speaks the same protocol without it, so the SDK is no dependency of
# rackcert. Their own virtual environment, so rackcert's ansible-core pin in .venv stays as it
# is; tests/integration/test_twin_conformance.py runs them against the twin (RACKCERT_JUDGES_VENV overrides).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${RACKCERT_JUDGES_VENV:-/opt/rackcert-lab/judges}
PINS=(ansible==12.3.0 pyvmomi==9.1.1.0 requests vmware-vcenter==9.1.1.0)
if [ -x "$TARGET/bin/ansible" ] && "$TARGET/bin/python" - <<'PYEOF'
import importlib.metadata as m, sys
sys.exit(0 if m.version("ansible") == "12.3.0" and m.version("requests") else 1)
PYEOF
then
  # An environment from before the SDK joined the judges gets it added, nothing else changed.
  if ! "$TARGET/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vmware-vcenter') != '9.1.1.0')" 2>/dev/null; then
    "$TARGET/bin/pip" install -q --disable-pip-version-check vmware-vcenter==9.1.1.0 2>&1 \
      | grep -v "^WARNING: Location" || true
  fi
  "$TARGET/bin/python" -c "import com.vmware.esx.settings.clusters_client, vmware.vapi.vsphere.client" \
    || { echo "vSphere judges: the vSphere Automation SDK did not install" >&2; exit 1; }
  echo "vSphere judges: present in $TARGET"
  exit 0
fi
# Built in place (a venv records its own path in its scripts); a half-built one fails the
# check above and is rebuilt on the next run.
rm -rf "$TARGET"
mkdir -p "$(dirname "$TARGET")"
python3 -m venv "$TARGET"
"$TARGET/bin/pip" install -q --disable-pip-version-check "${PINS[@]}" 2>&1 \
  | grep -v "^WARNING: Location" || true
"$TARGET/bin/python" -c "import ansible_collections.community.vmware, requests, pyVmomi, com.vmware.esx.settings.clusters_client" \
  || { echo "vSphere judges did not install" >&2; exit 1; }
"$TARGET/bin/python" -c "import importlib.metadata as m; print('vSphere judges: ansible', m.version('ansible'), 'ansible-core', m.version('ansible-core'), 'in', '$TARGET')"
