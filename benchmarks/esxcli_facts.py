"""What reading each host through esxcli adds to discovery (plan, provision's final look).

`discover(si)` reads the rack in one PropertyCollector retrieval; `discover(si, esxcli=True)`
also asks every connected host, through vCenter, for its build, VIBs, VAAI status and
passthrough (provision.esxcli.host_facts: 5 SOAP calls per host, ESXCLI_CONCURRENCY hosts at
a time). Prints, per rack size, the round trips and wall seconds of both on a TLS twin of
that many R750xa hosts.

    .venv/bin/python benchmarks/esxcli_facts.py            # 4 16 64
    .venv/bin/python benchmarks/esxcli_facts.py 4 256 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.discovery import ESXCLI_CONCURRENCY, discover  # noqa: E402
from provision.session import connect  # noqa: E402
from rackcert.core.paths import REPO_ROOT  # noqa: E402
from rackcert.core.spec_loader import load_spec  # noqa: E402
from rackcert.lab import lifetime, twin  # noqa: E402


def measure(count: int, workdir: Path) -> dict[str, Any]:
    """Both discoveries on one twin of `count` hosts."""
    loaded = load_spec(REPO_ROOT / "inventories" / "r750xa-4node.yaml").spec
    files = twin.TwinFiles.in_dir(workdir / f"n{count}")
    desc = twin.synthetic_description(count, loaded, files, vms_per_host=1)
    desc["tls"] = True
    started = twin.start(desc, files, timeout=900)
    try:
        spec = loaded.model_copy(deep=True)
        vc = spec.vcenter
        vc.host, vc.port, vc.protocol = "127.0.0.1", started.port, "https"
        vc.password_env, vc.password_file = None, str(files.password_file)
        vc.tls.ca_file, vc.tls.thumbprint = str(files.cert_file), None
        with connect(spec) as si:
            t0 = time.perf_counter()
            plain = discover(si)
            plain_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            full = discover(si, esxcli=True)
            full_s = time.perf_counter() - t0
        answered = sum(1 for h in full.hosts if h.esxcli is not None and h.esxcli.answered)
        assert answered == count, (answered, count)
        return {
            "hosts": count,
            "round_trips": plain.round_trips,
            "seconds": round(plain_s, 3),
            "esxcli_round_trips": full.round_trips,
            "esxcli_seconds": round(full_s, 3),
        }
    finally:
        started.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[4, 16, 64])
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rackcert-esxcli-bench-") as tmp:
        rows = [measure(n, Path(tmp)) for n in args.sizes]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"esxcli facts, {ESXCLI_CONCURRENCY} hosts at a time")
    print(f"{'hosts':>6} {'trips':>6} {'seconds':>8} | {'+esxcli trips':>13} {'seconds':>8}")
    for r in rows:
        print(
            f"{r['hosts']:>6} {r['round_trips']:>6} {r['seconds']:>8}"
            f" | {r['esxcli_round_trips']:>13} {r['esxcli_seconds']:>8}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(lifetime.run_main("benchmarks/esxcli_facts.py", main))
