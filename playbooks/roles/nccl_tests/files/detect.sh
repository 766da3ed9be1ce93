#!/bin/sh
# What building nccl-tests needs on this node, as one JSON line (read-only, no side effects).
# Input (environment): NT_PREFIX (the versioned install prefix), NT_CUDA_HOME and
# NT_NCCL_HOME (given by the operator, else found), NT_PYTHONS (interpreters whose
# site-packages may hold pip's nvidia-nccl-cu* package: the DL environment first).
# CUDA_HOME is nvcc's prefix (PATH, /usr/local/cuda, the newest /usr/local/cuda-*). NCCL is
# nccl.h plus libnccl.so* in one prefix: the given one, the system's (NVIDIA's libnccl-dev
# puts them in /usr/include and the multiarch lib directory), or pip's nvidia/nccl/{include,lib}.
set -u
json() { printf '"%s": "%s"' "$1" "$(printf '%s' "$2" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

on_path=$(command -v all_reduce_perf 2>/dev/null || true)

# CUDA_HOME: the prefix of a working nvcc that has CUDA's headers beside it (a wrapper
# script on PATH is followed to no prefix, so the standard places come first).
cuda_home=""
if [ -n "${NT_CUDA_HOME:-}" ]; then
  candidates="$NT_CUDA_HOME/bin/nvcc"
else
  candidates="/usr/local/cuda/bin/nvcc $(command -v nvcc 2>/dev/null || true) $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -rV)"
fi
for nvcc in $candidates; do
  [ -x "$nvcc" ] || continue
  home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  if [ -f "$home/include/cuda_runtime.h" ] && "$home/bin/nvcc" --version >/dev/null 2>&1; then
    cuda_home="$home"; break
  fi
done

# One prefix's include/ and lib/ (or lib64/, or the multiarch directory) holding NCCL.
nccl_inc=""; nccl_lib=""; nccl_from=""
lib_in() {
  for d in "$@"; do
    for f in "$d"/libnccl.so "$d"/libnccl.so.[0-9]*; do
      [ -e "$f" ] && { echo "$d"; return 0; }
    done
  done
  return 1
}
if [ -n "${NT_NCCL_HOME:-}" ]; then
  if [ -f "$NT_NCCL_HOME/include/nccl.h" ] && l=$(lib_in "$NT_NCCL_HOME/lib" "$NT_NCCL_HOME/lib64"); then
    nccl_inc="$NT_NCCL_HOME/include"; nccl_lib="$l"; nccl_from="given: $NT_NCCL_HOME"
  fi
else
  multiarch=$(gcc -print-multiarch 2>/dev/null || true)
  for inc in /usr/include /usr/local/include ${cuda_home:+"$cuda_home/include"}; do
    [ -f "$inc/nccl.h" ] || continue
    base=$(dirname "$inc")
    if l=$(lib_in ${multiarch:+"$base/lib/$multiarch"} "$base/lib64" "$base/lib"); then
      nccl_inc="$inc"; nccl_lib="$l"; nccl_from="system: $inc"; break
    fi
  done
  if [ -z "$nccl_inc" ]; then
    for py in ${NT_PYTHONS:-}; do
      command -v "$py" >/dev/null 2>&1 || continue
      dir=$("$py" -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' 2>/dev/null) || continue
      if [ -f "$dir/include/nccl.h" ] && l=$(lib_in "$dir/lib"); then
        nccl_inc="$dir/include"; nccl_lib="$l"; nccl_from="python: $py"; break
      fi
    done
  fi
fi

# The GPUs' compute capabilities (nvidia-smi 9.0 -> sm_90): one -gencode each, a short build.
gencode=""
if command -v nvidia-smi >/dev/null 2>&1; then
  for cap in $(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -u); do
    case "$cap" in *[!0-9]*|"") continue ;; esac
    gencode="$gencode -gencode=arch=compute_$cap,code=sm_$cap"
  done
fi
# What a build is made from: nvcc's release and the NCCL library it links. A build whose
# stamp (BUILT-WITH, written by the role after the build) says otherwise was made against a
# CUDA or NCCL that changed since, and is built again.
built_with=""
if [ -n "$cuda_home" ] && [ -n "$nccl_lib" ]; then
  nccl_so=$(ls "$nccl_lib"/libnccl.so.[0-9]* 2>/dev/null | sort -V | tail -1)
  built_with="cuda: $("$cuda_home/bin/nvcc" --version 2>/dev/null | tail -1); nccl: $(readlink -f "${nccl_so:-$nccl_lib/libnccl.so}")"
fi
installed=""
if [ -n "${NT_PREFIX:-}" ] && [ -x "$NT_PREFIX/bin/all_reduce_perf" ] \
   && [ "$(cat "$NT_PREFIX/BUILT-WITH" 2>/dev/null)" = "$built_with" ]; then
  installed="$NT_PREFIX/bin/all_reduce_perf"
fi
toolchain=""
for t in make g++ tar; do command -v "$t" >/dev/null 2>&1 || toolchain="$toolchain $t"; done

printf '{'
json on_path "$on_path"; printf ', '; json installed "$installed"; printf ', '
json cuda_home "$cuda_home"; printf ', '; json nccl_include "$nccl_inc"; printf ', '
json nccl_lib "$nccl_lib"; printf ', '; json nccl_from "$nccl_from"; printf ', '
json gencode "${gencode# }"; printf ', '; json missing_tools "${toolchain# }"; printf ', '
json nproc "$(nproc 2>/dev/null || echo 2)"; printf ', '; json built_with "$built_with"
printf '}\n'
