#!/usr/bin/env bash
# The tools only the tests and .ci/run's lint step use (pyproject's `test-tools` extra: ruff,
# mypy, hypothesis, ansible-lint, selenium), into .venv. Test-only: .ci/setup runs it in the
# background after what the demo needs, so it may run while the demo imports from .venv;
# hence it only ADDS packages: every distribution already installed is pinned to its version
# (a pip constraints file), and a tool that would need another version fails here, named in
# .venv/log/test-tools.log, instead of changing the demo's packages under it.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
# Prints the extra's requirements; writes name==version of every installed distribution but
# rackcert itself to $pins; exits 3 when every requirement is already met.
rc=0
out=$("$PY" - "$pins" <<'PYEOF'
import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

with open("pyproject.toml", "rb") as f:
    tools = tomllib.load(f)["project"]["optional-dependencies"]["test-tools"]
have = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
with open(sys.argv[1], "w") as out:
    out.writelines(f"{n}=={v}\n" for n, v in sorted(have.items()) if n != "rackcert")
print(" ".join(tools))
met = all(
    canonicalize_name(r.name) in have
    and r.specifier.contains(have[canonicalize_name(r.name)], prereleases=True)
    for r in map(Requirement, tools)
)
sys.exit(3 if met else 0)
PYEOF
) || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "test tools: cannot read pyproject.toml" >&2; exit 1; }
read -r -a tools <<<"$out"
if [ "$rc" -eq 3 ]; then
  echo "test tools: present (${tools[*]})"
  exit 0
fi
"$PY" -m pip install -q --disable-pip-version-check -c "$pins" "${tools[@]}" 2>&1 \
  | grep -v "^WARNING: Location" || true
"$PY" -c "import hypothesis, ansiblelint, selenium, mypy" && [ -x .venv/bin/ruff ] \
  || { echo "test tools did not install (${tools[*]})" >&2; exit 1; }
echo "test tools: installed (${tools[*]})"
