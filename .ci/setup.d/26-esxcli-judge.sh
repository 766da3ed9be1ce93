#!/usr/bin/env bash
# VMware's own esxcli (PyPI's vmware-esxcli, Apache-2.0), the judge of the twin's esxcli
# (tests/integration/test_twin_esxcli.py, tests/support/esxcli_judge.py). It bundles its own pyVmomi, so it gets a
# virtual environment of its own, beside the community.vmware judges of 25-vsphere-judges.sh
# (RACKCERT_ESXCLI_VENV overrides the place). A test-only dependency: rackcert never imports it.
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${RACKCERT_ESXCLI_VENV:-/opt/rackcert-lab/esxcli}
PIN=vmware-esxcli==9.1.0
if [ -x "$TARGET/bin/esxcli" ] && "$TARGET/bin/python" - <<'PYEOF'
import importlib.metadata as m, sys
sys.exit(0 if m.version("vmware-esxcli") == "9.1.0" else 1)
PYEOF
then
  echo "esxcli judge: present in $TARGET"
  exit 0
fi
# Built in place (a venv records its own path in its scripts); a half-built one fails the
# check above and is rebuilt on the next run.
rm -rf "$TARGET"
mkdir -p "$(dirname "$TARGET")"
python3 -m venv "$TARGET"
"$TARGET/bin/pip" install -q --disable-pip-version-check "$PIN" 2>&1 \
  | grep -v "^WARNING: Location" || true
[ -x "$TARGET/bin/esxcli" ] || { echo "esxcli judge did not install" >&2; exit 1; }
"$TARGET/bin/python" -c "import importlib.metadata as m; print('esxcli judge: vmware-esxcli', m.version('vmware-esxcli'), 'in', '$TARGET')"
