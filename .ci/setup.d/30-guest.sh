#!/usr/bin/env bash
# The guest layer's tests: SSH test hosts (sshd in network namespaces) and Ansible
# against them. Debian packages the hosts and the roles use on the machine itself
# (the test hosts see the machine's /usr through an overlay):
#   openssh-server/-client  the hosts' sshd, ssh-keygen, ssh-keyscan
#   iproute2, util-linux     ip netns / veth / bridge, unshare, nsenter, findmnt, mount
#   python3-apt              Ansible's apt module on the hosts
#   python3-venv             the dl_runtime role's virtual environment
#   dpkg-dev                 dpkg-scanpackages for the tests' local apt repo of fake vendor packages
#   python3-debian           ansible.builtin.deb822_repository on the hosts (the vendor sources)
#   gnupg                    the tests' signing keys and signed InRelease of a vendor repo
#   xorriso                  the tests' stand-in MLNX_OFED .iso (xorriso -as mkisofs)
#   libarchive-tools         bsdtar: the roles unpack an ISO with it where the kernel has no iso9660
#   chrony                   each host's time daemon, and the NTP server on its bridge's gateway
# Runs as root; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/../.."
PACKAGES=(openssh-server openssh-client iproute2 util-linux python3-apt python3-venv dpkg-dev
  python3-debian gnupg xorriso libarchive-tools chrony)
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# sshd refuses to start without its privilege-separation directory.
mkdir -p /run/sshd
# Leftovers of crashed test runs (namespaces of dead pids; never the lab's).
if [ -x .venv/bin/python ]; then
  .venv/bin/python -c "from rackcert.lab.lifetime import clear_stale
c = clear_stale()
print(c.line()) if c else None" || true
fi
