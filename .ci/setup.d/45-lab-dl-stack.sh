#!/usr/bin/env bash
# The lab nodes' deep-learning framework: torch, torchvision and Horovod (with what they
# need) as the node image ships them, in /opt/rackcert-lab/dl-site. The SSH test hosts
# see it through a .pth in their own system Python's dist-packages (rackcert.lab.sshhosts),
# the way a DL image has its framework installed system-wide; rackcert's dl_runtime role
# then builds the nodes' environment over it (guest.dl_system_site_packages) and installs
# the bench worker there. Hard links of .venv's installed files (same file system): no copy,
# no download, ~2 s, then byte-compiled (below); the hosts never see .venv or the checkout
# themselves. Laid anew only when the distributions' versions (or this script) changed:
# $TARGET/.rackcert-stack holds their key.
# Open MPI's mpirun (Debian's openmpi-bin), the bench's second launcher, is part of that
# image too (NVIDIA's NGC PyTorch images carry Open MPI): installed into this machine's
# /usr, which every test host sees through its own /usr overlay (tests/integration/test_bench_nodes.py, the mpirun test).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v mpirun >/dev/null || ! dpkg -s openmpi-bin >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null
fi
echo "lab DL stack: $(mpirun --version | head -n 1)"
TARGET=${RACKCERT_LAB_DL_SITE:-/opt/rackcert-lab/dl-site}
"${RACKCERT_PYTHON:-.venv/bin/python}" - "$TARGET" "$(sha256sum .ci/setup.d/45-lab-dl-stack.sh | cut -c1-16)" <<'PYEOF'
import compileall, hashlib, importlib.util, os, re, shutil, sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

target = Path(sys.argv[1])
# (distribution, extra) pairs; markers evaluated for this Python, extras followed
# (torch reaches its CUDA libraries through cuda-toolkit's extras).
seen, todo = set(), [("torch", ""), ("torchvision", ""), ("horovod", "")]
while todo:
    name, extra = todo.pop()
    name = re.sub(r"[-_.]+", "-", name).lower()
    if (name, extra) in seen:
        continue
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    seen.add((name, extra))
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        todo += [(req.name, "")] + [(req.name, e) for e in req.extras]
seen = {name for name, _extra in seen}
# A distribution's RECORD (every file with its hash) tells one build from another of the same
# version: Horovod 0.28.1 built with MPI is not the Gloo-only build.
pins = "\n".join(
    f"{n}=={metadata.version(n)} {hashlib.sha256((metadata.distribution(n).read_text('RECORD') or '').encode()).hexdigest()[:16]}"
    for n in sorted(seen)
)
key = hashlib.sha256(f"{sys.argv[2]}\n{pins}".encode()).hexdigest()[:16]
stamp = target / ".rackcert-stack"
# The stamp: the key, the script's digest, then one line per distribution (rackcert.lab.dlstack
# reads them: the demo asks whether Horovod is in the nodes' image yet). Written last.
stamp_text = f"{key}\nscript {sys.argv[2]}\n{pins}\n"
old = stamp.read_text().splitlines() if stamp.is_file() else []
if old[:1] == [key]:
    print(f"lab DL stack: {len(seen)} distributions in {target}, unchanged (key {key})")
    sys.exit(0)


def link(src: Path, dst: Path) -> None:
    if dst.exists():  # a .pyc that RECORD lists too (a .venv installed with bytecode)
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def lay(names, into: Path) -> tuple[int, list[Path]]:
    """Hard-link the distributions' files under `into`; (files, the .py files laid)."""
    count, sources = 0, []
    for name in sorted(names):
        dist = metadata.distribution(name)
        base = Path(dist.locate_file(""))
        # The dist-info last: a reader that finds it finds the package's files already there.
        files = sorted(dist.files or [], key=lambda f: ".dist-info" in str(f.parts[0]))
        for f in files:
            src = base / f
            if not src.is_file() or ".." in f.parts:
                continue
            link(src, into / f)
            count += 1
            # Set-up installs torch with pip --no-compile, so its RECORD lists no bytecode:
            # what .venv's Python has compiled by now comes along, so the nodes do not compile
            # it again.
            if src.suffix == ".py":
                sources.append(into / f)
                pyc = Path(importlib.util.cache_from_source(str(src)))
                if pyc.is_file():
                    link(pyc, Path(importlib.util.cache_from_source(str(into / f))))
    return count, sources


# Only distributions added (set-up lays the stack without Horovod first, so that the demo need
# not wait for Horovod's build, and adds Horovod in the background once it is installed): the
# new files go into the stack in place, nothing there is replaced or removed, so lab nodes
# importing torch from it meanwhile (a demo running) see no file change under them.
old_pins = set(old[2:])
new_pins = set(pins.splitlines())
if old[1:2] == [f"script {sys.argv[2]}"] and old_pins < new_pins:
    added = {line.split("==", 1)[0] for line in new_pins - old_pins}
    count, sources = lay(added, target)
    for src in sources:
        compileall.compile_file(str(src), quiet=2)
    fresh = stamp.with_name(stamp.name + ".new")
    fresh.write_text(stamp_text)
    fresh.rename(stamp)
    print(f"lab DL stack: added {', '.join(sorted(added))} ({count} files) in {target}")
    sys.exit(0)

tmp = target.with_name(target.name + ".tmp")
shutil.rmtree(tmp, ignore_errors=True)
count, _ = lay(seen, tmp)
# Bytecode for every module, as a node image has it (pip compiles what it installs; so do
# Debian's packages). The hosts see /opt through an overlay of their own, so without it each
# new host compiled torch, torchvision, numpy and Horovod again at its first import: measured,
# `import torch, torch.distributed, torchvision.models, numpy, horovod.torch` 7.6 s without,
# 2.4 s with. ~9 s on 2 cores when nothing is compiled yet, once per stack. What is already
# compiled (the hard-linked .pyc) is left alone; a few files are for newer Pythons (torch's
# py312_intrinsics) and fail here.
compileall.compile_dir(str(tmp), quiet=2, workers=0)
pycs = sum(1 for _ in tmp.rglob("*.pyc"))
shutil.rmtree(target, ignore_errors=True)
target.parent.mkdir(parents=True, exist_ok=True)
(tmp / ".rackcert-stack").write_text(stamp_text)
tmp.rename(target)
print(f"lab DL stack: {len(seen)} distributions, {count} files ({pycs} compiled) in {target}")
PYEOF
