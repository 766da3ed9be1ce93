#!/usr/bin/env bash
# Horovod 0.28.1 (CPU, Gloo) into .venv, built from its sdist against the torch already there.
# Why a patch: the sdist forces C++14 in two CMakeLists lines and torch 2.x headers need
# C++17 (torch 2.13) or C++20 (torch 2.14: "C++20 or later compatible compiler is required
# to use PyTorch"); the standard is read from torch's own header. The same fix was
# merged upstream after 0.28.1 and never released. Built with --no-build-isolation so it
# compiles against .venv's torch, not a fresh one pip would fetch. About 2-4 min on 2 cores.
# Skipped when horovod.torch already imports.
# Without MPI on purpose (HOROVOD_WITHOUT_MPI=1 below), although 45-lab-dl-stack.sh installs
# openmpi-bin: Horovod's build would otherwise probe for MPI, and the lab's ranks are
# started by horovodrun with its Gloo controller; mpirun, the second launcher, starts
# torch.distributed ranks (Open MPI's OMPI_COMM_WORLD_* variables), which need no Horovod
# built against MPI. openmpi-bin has no headers or mpicxx (libopenmpi-dev), so an MPI build
# would need more packages and a rebuild of minutes for a path the bench does not take.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
VERSION=0.28.1
# sha256 of horovod-0.28.1.tar.gz as the registry serves it (pinned: same bytes every build).
SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0

if "$PY" -c "import horovod.torch" >/dev/null 2>&1; then
  echo "horovod already imports: $("$PY" -c 'import horovod; print(horovod.__version__)')"
  exit 0
fi
command -v cmake >/dev/null && command -v g++ >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends cmake g++ make >/dev/null
}

work=$(mktemp -d /tmp/horovod-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$work" "horovod==$VERSION"
sdist="$work/horovod-$VERSION.tar.gz"
got=$(sha256sum "$sdist" | cut -d' ' -f1)
if [ "$got" != "$SDIST_SHA256" ]; then
  echo "horovod sdist sha256 $got differs from the pinned $SDIST_SHA256" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$work"
src="$work/horovod-$VERSION"
# The C++ standard torch's own headers demand (torch 2.13: C++17; torch 2.14: C++20).
all_h=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__),
  "include/torch/csrc/api/include/torch/all.h"))')
cxxstd=17
grep -q 'C++20 or later' "$all_h" && cxxstd=20
echo "torch $("$PY" -c 'import torch; print(torch.__version__)') wants C++$cxxstd"
for f in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
  grep -q 'set(CMAKE_CXX_STANDARD 14)' "$f" || { echo "unexpected $f: no C++14 line" >&2; exit 1; }
  sed -i "s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD $cxxstd)/" "$f"
done
# CPU-only on purpose (Gloo): FindPytorch.cmake turns CUDA on whenever torch is a CUDA build and
# a CUDA_HOME can be guessed (nvcc on PATH or /usr/local/cuda), then fails on a machine that has
# nvcc but no cudart. Tell it plainly that this torch is used without CUDA.
"$PY" - "$src" <<'PYEOF'
import pathlib, sys
src = pathlib.Path(sys.argv[1])
probe = ("print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None))"
         " else False)")
path = src / "cmake/Modules/FindPytorch.cmake"
text = path.read_text()
if text.count(probe) != 1:
    sys.exit(f"unexpected {path}: CUDA probe not found once")
path.write_text(text.replace(probe, "print(False)"))
PYEOF
# Runtime deps first from the registry (build isolation is off, so pip will not add them).
"$PY" -m pip install -q --disable-pip-version-check cloudpickle psutil pyyaml packaging cffi
start=$(date +%s)
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=GLOO \
  HOROVOD_GPU_OPERATIONS= MAKEFLAGS="-j$(nproc)" \
  "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps "$src"
"$PY" -c "import horovod, horovod.torch; print('horovod', horovod.__version__, 'imports')"
echo "horovod $VERSION built in $(( $(date +%s) - start )) s"
