#!/usr/bin/env bash
# The vSphere rack twin: govmomi's simulator (Debian source package) plus rackcert's Go harness
# in twin/, built in GOPATH mode into ~/.cache/rackcert/vcsim/<source hash>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=()
for p in golang-go golang-github-vmware-govmomi-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
.venv/bin/python -c "from rackcert.lab import twin; print('vcsim twin:', twin.build())"
