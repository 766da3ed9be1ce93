#!/usr/bin/env bash
# Horovod 0.28.1 (CPU, Gloo) into .venv, built from its sdist against the torch already there.
#   40-horovod.sh               install it (from the cached wheel; built first if there is none)
#   40-horovod.sh --wheel-only  build or find the wheel, install nothing (.ci/setup starts this
#                               in the background as soon as torch is in, while the rest installs)
# Why a patch: the sdist forces C++14 in two CMakeLists lines and torch 2.x headers need
# C++17 (torch 2.13) or C++20 (torch 2.14: "C++20 or later compatible compiler is required
# to use PyTorch"); the standard is read from torch's own header. The same fix was
# merged upstream after 0.28.1 and never released. Built with --no-build-isolation so it
# compiles against .venv's torch, not a fresh one pip would fetch.
# Built once per version: the wheel is kept in ~/.cache/rackcert/wheels/horovod-<ver>-<key>/,
# key = sha256 of what decides the binary (the sdist's digest, torch's version, Python's ABI,
# the machine, this script), so a second clone or a re-created .venv installs it in seconds.
# A .venv whose Horovod was installed with this key (.venv/.rackcert-horovod) is left alone.
# Release, not the RelWithDebInfo (-O3 -g) of Horovod's setup.py: the debug info of every
# torch-header-heavy translation unit costs build time and nobody here reads it.
# With MPI (HOROVOD_WITH_MPI=1, Debian's Open MPI from libopenmpi-dev): under Slurm the ranks
# are started by `srun --mpi=pmix` (as DeepOps does), not by horovodrun, and Horovod then
# meets the other ranks through MPI_Init, which Open MPI answers from Slurm's PMIx server.
# Debian's Open MPI has no Slurm PMI-2 support ("not built with SLURM's PMI support"), so
# pmix it is. Gloo stays the CPU operations and horovodrun's controller (the SSH launch),
# so the lab's other paths do not change. MPI adds Horovod's mpi_controller and
# mpi_operations to the build: a few translation units of the ~40 it compiles.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
VERSION=0.28.1
# sha256 of horovod-0.28.1.tar.gz as the registry serves it (pinned: same bytes every build).
SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
wheel_only=false
[ "${1:-}" = --wheel-only ] && wheel_only=true

# Versions from metadata: importing torch costs seconds, and nothing here needs it imported.
read -r torch_version abi < <("$PY" -c 'import sys
from importlib.metadata import version
print(version("torch"), sys.implementation.cache_tag)' 2>/dev/null || true)
[ -n "${abi:-}" ] || { echo "horovod: torch is not installed in .venv" >&2; exit 1; }
key=$({ echo "$SDIST_SHA256 torch==$torch_version $abi $(uname -m)"; cat .ci/setup.d/40-horovod.sh; } \
  | sha256sum | cut -c1-16)
stamp=.venv/.rackcert-horovod
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rackcert/wheels/horovod-$VERSION-$key

installed() {
  "$PY" -c 'from importlib.metadata import version; print(version("horovod"))' 2>/dev/null
}
if [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] && [ "$(installed)" = "$VERSION" ]; then
  echo "horovod $VERSION: installed (key $key)"
  exit 0
fi
# A Horovod installed before the key existed: kept when it imports against this torch and
# was built with MPI (an older Gloo-only build is rebuilt: srun --mpi=pmix needs MPI).
if [ "$(installed)" = "$VERSION" ] \
  && "$PY" -c "import horovod.torch as h; raise SystemExit(not h.mpi_built())" >/dev/null 2>&1; then
  $wheel_only || echo "$key" >"$stamp"
  echo "horovod $VERSION: already imports (key $key)"
  exit 0
fi

build_wheel() {
  command -v cmake >/dev/null && command -v g++ >/dev/null && command -v make >/dev/null \
    && command -v mpicxx >/dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq -o DPkg::Lock::Timeout=300
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 cmake g++ make \
      libopenmpi-dev \
      >/dev/null
  }
  local work start sdist src all_h cxxstd
  work=$(mktemp -d /tmp/horovod-build.XXXXXX)
  # shellcheck disable=SC2064  # expand now: $work is local
  trap "rm -rf '$work'" RETURN
  # --no-build-isolation: pip reads the sdist's metadata with .venv's setuptools instead of
  # installing a fresh one into a throwaway environment first.
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    --no-build-isolation -d "$work" "horovod==$VERSION" 2>&1 | grep -v "^WARNING: Location" || true
  sdist="$work/horovod-$VERSION.tar.gz"
  [ -f "$sdist" ] || { echo "horovod $VERSION: the sdist did not download" >&2; return 1; }
  got=$(sha256sum "$sdist" | cut -d' ' -f1)
  if [ "$got" != "$SDIST_SHA256" ]; then
    echo "horovod sdist sha256 $got differs from the pinned $SDIST_SHA256" >&2
    return 1
  fi
  tar -xzf "$sdist" -C "$work"
  src="$work/horovod-$VERSION"
  # The C++ standard torch's own headers demand (torch 2.13: C++17; torch 2.14: C++20).
  all_h=$("$PY" -c 'import importlib.util, os
base = importlib.util.find_spec("torch").submodule_search_locations[0]
print(os.path.join(base, "include/torch/csrc/api/include/torch/all.h"))')
  cxxstd=17
  grep -q 'C++20 or later' "$all_h" && cxxstd=20
  echo "torch $torch_version wants C++$cxxstd"
  for f in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
    grep -q 'set(CMAKE_CXX_STANDARD 14)' "$f" || { echo "unexpected $f: no C++14 line" >&2; return 1; }
    sed -i "s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD $cxxstd)/" "$f"
  done
  # CPU-only on purpose (Gloo): FindPytorch.cmake turns CUDA on whenever torch is a CUDA build
  # and a CUDA_HOME can be guessed (nvcc on PATH or /usr/local/cuda), then fails on a machine
  # that has nvcc but no cudart. Tell it plainly that this torch is used without CUDA.
  # And Release instead of RelWithDebInfo (see the top).
  "$PY" - "$src" <<'PYEOF'
import pathlib, sys
src = pathlib.Path(sys.argv[1])
def patch(rel, old, new):
    path = src / rel
    text = path.read_text()
    if text.count(old) != 1:
        sys.exit(f"unexpected {path}: {old!r} not found once")
    path.write_text(text.replace(old, new))
patch("cmake/Modules/FindPytorch.cmake",
      "print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None)) else False)",
      "print(False)")
patch("setup.py", "else 'RelWithDebInfo'", "else 'Release'")
PYEOF
  start=$(date +%s)
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_CPU_OPERATIONS=GLOO \
    HOROVOD_GPU_OPERATIONS= MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
    -w "$work/dist" "$src" 2>&1 | grep -v "^WARNING: Location" || true
  ls "$work"/dist/horovod-"$VERSION"-*.whl >/dev/null 2>&1 \
    || { echo "horovod $VERSION: the wheel did not build" >&2; return 1; }
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  mv "$work"/dist/horovod-"$VERSION"-*.whl "$cache.tmp/"
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  echo "horovod $VERSION wheel built in $(($(date +%s) - start)) s: $cache"
}

mkdir -p "$(dirname "$cache")"
# One build at a time per key (a second set-up waits for the first one's wheel).
exec 9>"$cache.lock"
flock 9
if ls "$cache"/horovod-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "horovod $VERSION wheel: $cache (cached)"
else
  build_wheel
fi
flock -u 9
$wheel_only && exit 0

# Its runtime deps from the registry, then the wheel itself (over any broken install).
"$PY" -m pip install -q --disable-pip-version-check cloudpickle psutil pyyaml packaging cffi 2>&1 \
  | grep -v "^WARNING: Location" || true
"$PY" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
  "$cache"/horovod-"$VERSION"-*.whl 2>&1 | grep -v "^WARNING: Location" || true
"$PY" -c "import horovod, horovod.torch; print('horovod', horovod.__version__, 'imports')"
echo "$key" >"$stamp"
