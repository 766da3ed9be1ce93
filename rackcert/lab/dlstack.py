"""What the lab nodes' image holds: the lab DL stack's distributions, as set-up laid them.

Why: set-up (.ci/setup) lays the stack (torch, torchvision; .ci/setup.d/45-lab-dl-stack.sh)
before Horovod's source build is done, so that a newcomer's `rackcert demo` need not wait
minutes for it, and adds Horovod in the background once it is built. The demo asks here
whether Horovod is in the image yet, and when it is not, certifies without it and says so.

The stack's stamp (`.rackcert-stack`, written last, after every file it names is there):
its key, `script <digest>`, then one `name==version <RECORD digest>` line per distribution.
A stamp of the older form (the key alone) names none: the dist-info folders answer then.

    dlstack.distributions()          # {"torch": "2.14.1", ...}, None without a stack
    dlstack.lacks("horovod")         # True: a stack is there, Horovod is not in it (yet)
"""

from __future__ import annotations

import re
from pathlib import Path

from rackcert.lab.sshhosts.rootfs import LAB_DL_SITE

STAMP = ".rackcert-stack"
_PIN = re.compile(r"^(?P<name>[a-z0-9][a-z0-9.-]*)==(?P<version>\S+)")
_DIST_INFO = re.compile(r"^(?P<name>.+?)-(?P<version>[^-]+)\.dist-info$")


def _normal(name: str) -> str:
    """A distribution's name as PEP 503 compares it (the stamp's lines are written so)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(site: Path | None = None) -> dict[str, str] | None:
    """name -> version of what the lab's DL stack holds; None where there is no stack."""
    site = LAB_DL_SITE if site is None else site
    try:
        lines = (site / STAMP).read_text().splitlines()
    except OSError:
        return None
    pins = {m["name"]: m["version"] for m in map(_PIN.match, lines[1:]) if m}
    if pins:
        return pins
    found = (_DIST_INFO.match(p.name) for p in site.glob("*.dist-info"))
    return {_normal(m["name"]): m["version"] for m in found if m}


def lacks(name: str, site: Path | None = None) -> bool:
    """True when the lab has a DL stack and `name` is not in it (never for no stack at all:
    then the nodes' framework comes from elsewhere, and the spec's own answer stands)."""
    have = distributions(site)
    return have is not None and _normal(name) not in have


WITHOUT_HOROVOD = "lab-without-horovod.yaml"


def spec_without_horovod(spec_path: Path, out_dir: Path) -> Path:
    """The lab spec with guest.horovod off, written to `out_dir`: what the demo certifies while
    Horovod is not in the nodes' image yet. Its description says so, and so does the run's
    copy of it: the record never claims a Horovod path that was not run."""
    import yaml

    data = yaml.safe_load(Path(spec_path).read_text())
    data.setdefault("guest", {})["horovod"] = False
    meta = data.setdefault("metadata", {})
    meta["description"] = (
        f"{meta.get('description', '')} (Horovod left out: not in the lab nodes' image yet)"
    ).strip()
    out = out_dir / WITHOUT_HOROVOD
    out_dir.mkdir(parents=True, exist_ok=True)
    head = (
        f"# Written by `rackcert demo`: {Path(spec_path).name} with guest.horovod off, because\n"
        "# Horovod was not in the lab nodes' image yet (set-up builds it in the background).\n"
    )
    out.write_text(head + yaml.safe_dump(data, sort_keys=False))
    return out
