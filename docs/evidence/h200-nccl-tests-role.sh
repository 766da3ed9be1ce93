#!/usr/bin/env bash
# The nccl_tests role for real on one GPU node, then the all_reduce_perf it installed.
# Usage: bash docs/evidence/h200-nccl-tests-role.sh nccl-tests-2.19.6.tar.gz
# Needs ansible-core on the node; the tarball is NVIDIA/nccl-tests v2.19.6 (git archive).
set -u
T=$(readlink -f "$1")
export NCCL_NVLS_ENABLE=0
coll=$(mktemp -d) && mkdir -p "$coll/ansible_collections/rackcert"
ln -sfn "$PWD/playbooks" "$coll/ansible_collections/rackcert/gpu"
printf -- '- hosts: localhost\n  connection: local\n  roles: [rackcert.gpu.nccl_tests]\n' >"$coll/play.yml"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
for i in 1 2; do # the second run must change nothing
  s=$(date +%s)
  ANSIBLE_COLLECTIONS_PATH=$coll ansible-playbook -i localhost, "$coll/play.yml" \
    -e nccl_tests_tarball="$T" -e nccl_tests_sha256="$(sha256sum "$T" | cut -d' ' -f1)" \
    -e nccl_tests_version=2.19.6 -e '{"nccl_tests_pythons":["python3"]}' |
    grep -E "changed:|fatal|msg|localhost "
  echo "run $i: $(($(date +%s) - s)) s"
done
ldd /opt/rackcert/nccl-tests/bin/all_reduce_perf | grep -E "nccl|cudart"
/opt/rackcert/nccl-tests/bin/all_reduce_perf -b 8 -e 1G -f 2 -g 1 -c 1
