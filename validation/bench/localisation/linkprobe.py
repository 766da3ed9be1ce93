"""One node pair's link: bandwidth and latency, with the tools a bring-up team uses.

Why: localisation measures every pair in rounds (validation.bench.localisation.schedule); each pair
needs a figure for both directions, since one bad transceiver may slow one way only.
- TCP (the lab, and any rack without RDMA): Debian's iperf3, `--bidir -J -i 0.5`: both
  directions at once; each direction's figure is the median of its half-second intervals
  (a moment when a busy node did not schedule the receiver does not move it; a slow link
  is slow in every interval), the whole-run means kept beside; the pair's figure is the
  slower direction.
  Latency: the smallest RTT the kernel saw on the forward stream (`min_rtt`, us), which is
  the path's own delay, not the queue a shaper builds under load.
- RDMA (where /sys/class/infiniband has devices and perftest is installed): ib_write_bw
  (validation.bench.perftest parses it) and ib_write_lat, whose table (perftest README)
  is `#bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] ...`.

iperf3 servers run as daemons, one per node for the whole stage (`server_start`), so a
round costs one SSH per pair: the client on the pair's first node.
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
from typing import Any

IPERF3 = "iperf3"
PORT = 5201  # iperf3's default
INTERVAL_S = 0.5  # iperf3's report interval: a direction's figure is the median of these
LAT_BINARY = "ib_write_lat"


class LinkProbeError(ValueError):
    """A pair's tool gave no figure; the message is the tool's own reason."""


def pidfile(node: str, port: int = PORT) -> str:
    """The daemon's pidfile on the node `node` (the address the controller reaches it at).

    Why the address and not `$(hostname)`: the lab's hosts share one /tmp and one pid
    space, and two labs side by side (two test workers' racks) both have an `n1`; keyed on
    the hostname, one lab's start killed the other's daemons (issue 34's open defect). An
    address is one network namespace's, where the port is bound, in any lab or rack.
    """
    key = re.sub(r"[^A-Za-z0-9._-]", "_", node)
    return f"/tmp/rackcert-iperf3-{key}-{port}.pid"


def server_start(node: str, port: int = PORT) -> str:
    """Start an iperf3 daemon on the node (stops one this stage left before)."""
    return f"{server_stop(node, port)}; {IPERF3} -s -D -p {port} -I {pidfile(node, port)}"


def server_stop(node: str, port: int = PORT) -> str:
    """Stop the node's daemon by its pidfile, and only if that pid is an iperf3: the pid of
    a daemon that died with its host (or a crashed run) may be any process's by now."""
    f = pidfile(node, port)
    return (
        f'if [ -f {f} ]; then p="$(cat {f})";'
        f' if [ "$(cat /proc/$p/comm 2>/dev/null)" = {IPERF3} ]; then kill "$p"; fi;'
        f" rm -f {f}; fi; true"
    )


def client_command(server: str, seconds: int, port: int = PORT, tries: int = 10) -> str:
    """Both directions at once for `seconds`; retried (`tries` times, 0.3 s apart) while
    the server is not listening."""
    argv = [IPERF3, "-c", server, "-p", str(port), "-t", str(seconds), "-i", str(INTERVAL_S)]
    line = shlex.join([*argv, "--bidir", "-J"])
    return (
        # Not `&& break`: iperf3 -J can exit 0 with an "error" key (e.g. a refused connect).
        f"for i in $(seq {tries}); do out=$({line});"
        ' case "$out" in *"Connection refused"*) sleep 0.3;; *) break;; esac; done;'
        ' printf "%s\\n" "$out"'
    )


def parse_iperf3(text: str) -> dict[str, Any]:
    """iperf3 -J --bidir -> {forward_gbps, reverse_gbps (interval medians), gbps (the
    slower), forward_mean_gbps, reverse_mean_gbps, intervals, rtt_min_us, retransmits}."""
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise LinkProbeError(f"iperf3 printed no JSON: {text.strip()[:200]!r}")
    if data.get("error"):
        raise LinkProbeError(f"iperf3: {data['error']}")
    end = data.get("end") or {}
    try:
        fwd_mean = end["sum_received"]["bits_per_second"] / 1e9
        rev_mean = end["sum_received_bidir_reverse"]["bits_per_second"] / 1e9
    except (KeyError, TypeError):
        raise LinkProbeError("iperf3 JSON without both directions (needs iperf3 >= 3.7)") from None
    # Per interval: forward as the client sent it, reverse as the client received it.
    ivs = [i for i in data.get("intervals") or [] if "sum" in i and "sum_bidir_reverse" in i]
    fwd, rev = fwd_mean, rev_mean
    if ivs:
        fwd = statistics.median(i["sum"]["bits_per_second"] for i in ivs) / 1e9
        rev = statistics.median(i["sum_bidir_reverse"]["bits_per_second"] for i in ivs) / 1e9
    rtts = [
        s["sender"].get("min_rtt")
        for s in end.get("streams", [])
        if isinstance(s.get("sender"), dict) and s["sender"].get("sender")
    ]
    rtts = [r for r in rtts if r]
    return {
        "forward_gbps": fwd,
        "reverse_gbps": rev,
        "gbps": min(fwd, rev),
        "forward_mean_gbps": fwd_mean,
        "reverse_mean_gbps": rev_mean,
        "intervals": len(ivs),
        "rtt_min_us": min(rtts) if rtts else None,
        "retransmits": end.get("sum_sent", {}).get("retransmits"),
    }


_LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+(.*)$")


def parse_lat(text: str) -> dict[str, Any]:
    """ib_write_lat's table -> {size_bytes, t_typical_us, t_avg_us, t_min_us, t_max_us}."""
    columns: list[str] = []
    for line in text.splitlines():
        if m := _LAT_HEADER.search(line):
            columns = ["bytes", "iterations", *re.findall(r"(\S+?)\[usec\]", m.group(1))]
            continue
        cells = line.split()
        if columns and cells and all(re.fullmatch(r"[\d.]+", c) for c in cells):
            row = dict(zip(columns, (float(c) for c in cells), strict=False))
            return {
                "size_bytes": int(row["bytes"]),
                **{f"{k}_us": row[k] for k in ("t_typical", "t_avg", "t_min", "t_max") if k in row},
            }
    raise LinkProbeError("no ib_write_lat latency row in the output")


def lat_server(device: str | None, port: int) -> str:
    argv = [LAT_BINARY, "-F", "-p", str(port)] + (["-d", device] if device else [])
    return shlex.join(argv)


def lat_client(server: str, device: str | None, port: int) -> str:
    line = lat_server(device, port) + " " + shlex.quote(server)
    return f"for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1; {line} && exit 0; done; exit 1"


def iperf3_figures(text: str) -> dict[str, Any]:
    """A link row's figures from iperf3 -J's output, or `gbps` None and the error: one
    reading for the SSH and the Slurm paths (validation.bench.localisation.stages,
    validation.bench.transport)."""
    try:
        return parse_iperf3(text)
    except LinkProbeError as exc:
        return {"gbps": None, "error": str(exc)}


def rdma_figures(bw_text: str, lat_text: str) -> dict[str, Any]:
    """A link row's figures from ib_write_bw's and ib_write_lat's client output: bandwidth
    (or `gbps` None and the error) and the typical latency (None when it gave none)."""
    from validation.bench import perftest

    out: dict[str, Any] = {}
    try:
        best = perftest.parse(bw_text)["best_avg_gbps"]
        out.update(gbps=best, forward_gbps=best)
    except perftest.PerftestParseError as exc:
        out.update(gbps=None, error=str(exc))
    try:
        out["latency_us"] = parse_lat(lat_text).get("t_typical_us")
    except LinkProbeError:
        out["latency_us"] = None
    return out
