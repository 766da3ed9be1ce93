"""The questions a node is asked: shell commands, sent as ONE script per node.

A check never talks to a node itself. Every command the selected checks need is
put into one POSIX shell script, run once per node over testinfra (one SSH
session per node instead of one per command: that is what keeps 16 nodes close
to the time of one), and the output is cut back into one `ProbeOutput` per
probe by the markers the script prints. A probe names the tool it needs; when
the tool is not on the node's PATH the script says so instead of running it, so
a missing `nvidia-smi` is an answer ("nvidia-smi not found"), not a crash.

    >>> script = build_script([PROBES["os_release"]], expect)
    >>> outputs = split_output(host.run(script).stdout)
    >>> outputs["os_release"].text
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rackcert.ssh_target import hop_options, node_known_hosts
from rackcert.untrusted import strip_controls
from validation.expect import NodeExpect

BEGIN = "@@rackcert-probe-begin"
END = "@@rackcert-probe-end"
PROBE_TIMEOUT_S = 30

# Query fields of `nvidia-smi --query-gpu` the GPU checks read. FULL needs a recent
# driver; BASE is the subset every R450+ driver knows (the probe falls back to it).
GPU_QUERY_BASE = (
    "index,pci.bus_id,name,driver_version,memory.total,persistence_mode,ecc.mode.current,"
    "ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.pending,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max"
)
GPU_QUERY_FULL = (
    GPU_QUERY_BASE + ",remapped_rows.pending,remapped_rows.failure,pcie.link.gen.gpumax"
)


@dataclass(frozen=True)
class Probe:
    """One command; `tool` is the binary it needs (None: plain shell and /proc, /sys)."""

    name: str
    command: Callable[[NodeExpect], str]
    tool: str | None = None
    timeout_s: Callable[[NodeExpect], int] | None = None  # default PROBE_TIMEOUT_S


@dataclass(frozen=True)
class ProbeOutput:
    """What one probe printed (stdout and stderr together) and its exit status."""

    name: str
    rc: int
    text: str
    missing: str | None = None

    @property
    def ok(self) -> bool:
        return self.missing is None and self.rc == 0

    def why(self) -> str:
        """One line saying why this output cannot be used (empty when it can)."""
        if self.missing:
            return f"{self.missing} not found"
        if self.rc == 124:
            return f"{self.name} timed out after {PROBE_TIMEOUT_S}s"
        if self.rc != 0:
            first = next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")
            return f"exit status {self.rc}" + (f": {first[:200]}" if first else "")
        return ""


def _const(text: str) -> Callable[[NodeExpect], str]:
    return lambda _expect: text


def _ssh_peers(expect: NodeExpect) -> str:
    """Try every peer at once in the background (BatchMode: a password prompt is a failure),
    trusting only the peers' enrolled host keys (StrictHostKeyChecking=yes): a peer that
    answers with another key fails, as the launchers' hops then would. The last line ssh
    printed is the answer's message ("Host key verification failed.")."""
    if not expect.peers:
        return "true"
    setup, cleanup = "", ""
    if expect.peer_known_hosts is not None:
        setup, path, cleanup = node_known_hosts(expect.peer_known_hosts, "peers")
        hop = hop_options(path, connect_timeout=5)
    else:
        hop = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "StrictHostKeyChecking=yes"]
    opts = shlex.join(
        [*hop, "-o", "ControlMaster=no", "-o", "GSSAPIAuthentication=no", "-o", "LogLevel=ERROR"]
    )
    lines = [f"{setup} || exit 1"] if setup else []
    for peer in expect.peers:
        target = shlex.quote(f"{expect.user}@{peer.address}")
        name = shlex.quote(peer.name)
        lines.append(
            f"( out=$(ssh -n -T {opts} -p {peer.port} -- {target} true 2>&1); "
            f'echo "peer {name} rc=$? $(printf %s "$out" | tail -n 1 | cut -c1-200)" ) &'
        )
    lines.append("wait")
    if cleanup:
        lines.append(cleanup)
    return "\n".join(lines)


# DCGM's run levels take about 1, 3, 30 and 90 minutes (DCGM user guide, diagnostics).
DCGM_TIMEOUT_S = {0: 30, 1: 300, 2: 900, 3: 3600, 4: 7200}


def _dcgm_diag(expect: NodeExpect) -> str:
    if expect.dcgm_diag_level == 0 or expect.gpus == 0:
        return "echo 'dcgm diag not asked for'"
    return f"dcgmi diag -r {int(expect.dcgm_diag_level)} -j"


PROBES: dict[str, Probe] = {
    p.name: p
    for p in [
        Probe("hostname", _const("hostname; uname -r")),
        Probe("os_release", _const("cat /etc/os-release")),
        Probe(
            "gpu_query",
            _const(
                f"nvidia-smi --query-gpu={GPU_QUERY_FULL} --format=csv,nounits 2>/dev/null"
                f" || nvidia-smi --query-gpu={GPU_QUERY_BASE} --format=csv,nounits"
            ),
            "nvidia-smi",
        ),
        Probe("gpu_q", _const("nvidia-smi -q"), "nvidia-smi"),
        Probe("gpu_topo", _const("nvidia-smi topo -m"), "nvidia-smi"),
        Probe("gpu_nvlink", _const("nvidia-smi nvlink -s"), "nvidia-smi"),
        Probe(
            "kernel_log",
            _const(
                "out=$(dmesg 2>&1) || out=$(journalctl -k -b --no-pager 2>&1) ||"
                ' { printf "%s\\n" "$out"; exit 1; };'
                ' printf "%s\\n" "$out" | grep -E "Xid" | tail -n 200;'
                " true"
            ),
        ),
        Probe("modules", _const("cat /proc/modules")),
        Probe(
            "cuda_toolkit", _const("cat /usr/local/cuda/version.json 2>/dev/null || nvcc --version")
        ),
        Probe("ofed", _const("ofed_info -s"), "ofed_info"),
        Probe("ibdev2netdev", _const("ibdev2netdev"), "ibdev2netdev"),
        Probe(
            "ib_rate",
            _const(
                'for f in /sys/class/infiniband/*/ports/*/rate; do [ -e "$f" ] || continue;'
                ' echo "$f: $(cat "$f")"; done'
            ),
        ),
        Probe("mlxconfig", _const("mlxconfig q ATS_ENABLED"), "mlxconfig"),
        Probe("ctk_version", _const("nvidia-ctk --version"), "nvidia-ctk"),
        Probe("ctk_cdi", _const("nvidia-ctk cdi list"), "nvidia-ctk"),
        Probe("docker_runtimes", _const("docker info --format '{{json .Runtimes}}'"), "docker"),
        Probe("containerd_config", _const("containerd config dump"), "containerd"),
        Probe("mountinfo", _const("cat /proc/self/mountinfo")),
        Probe(
            "net",
            _const(
                'for d in /sys/class/net/*; do echo "mtu ${d##*/} $(cat "$d/mtu")"; done;'
                " ip -o -4 addr show 2>/dev/null | sed 's/^/addr /';"
                " ip route show default 2>/dev/null | sed 's/^/route /';"
                # /proc/net/route answers where `ip` is not installed (seen on the H200 machine).
                ' while read -r dev dst rest; do [ "$dst" = 00000000 ] &&'
                ' echo "route default dev $dev"; done < /proc/net/route 2>/dev/null; true'
            ),
        ),
        Probe(
            "clock",
            _const(
                "if command -v timedatectl >/dev/null 2>&1 &&"
                " v=$(timedatectl show -p NTPSynchronized --value 2>/dev/null); then"
                ' echo "timedatectl NTPSynchronized=$v";'
                " elif command -v chronyc >/dev/null 2>&1; then chronyc -n tracking;"
                ' else echo "neither timedatectl nor chronyc answered"; exit 127; fi'
            ),
        ),
        Probe("ssh_peers", _ssh_peers, "ssh"),
        Probe(
            "dcgm_diag",
            _dcgm_diag,
            "dcgmi",
            lambda e: DCGM_TIMEOUT_S.get(e.dcgm_diag_level, 7200) if e.gpus else 30,
        ),
    ]
}


def build_script(probes: Iterable[Probe], expect: NodeExpect, tool_path: str | None = None) -> str:
    """One sh script running every probe with markers, a timeout and a missing-tool guard."""
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    prefix = f"{shlex.quote(tool_path)}:" if tool_path else ""
    out = [f'export LC_ALL=C PATH={prefix}"$PATH":{path}']
    out.append(
        "if command -v timeout >/dev/null 2>&1;"
        f" then T='timeout -k 2 {PROBE_TIMEOUT_S}'; else T=; fi"
    )
    for probe in probes:
        body = shlex.quote(probe.command(expect))
        if probe.timeout_s is not None:  # its own limit, for this probe only
            limit = int(probe.timeout_s(expect))
            out.append(f"if command -v timeout >/dev/null 2>&1; then T='timeout -k 2 {limit}'; fi")
        out.append(f"echo '{BEGIN} {probe.name}@@'")
        if probe.tool:
            tool = shlex.quote(probe.tool)
            out.append(
                f"if ! command -v {tool} >/dev/null 2>&1; then echo '{END} {probe.name} 127"
                f" missing={probe.tool}@@'; else $T sh -c {body} </dev/null 2>&1;"
                f" printf '\\n{END} {probe.name} %s@@\\n' $?; fi"
            )
        else:
            out.append(
                f"$T sh -c {body} </dev/null 2>&1; printf '\\n{END} {probe.name} %s@@\\n' $?"
            )
        if probe.timeout_s is not None:  # back to the common limit
            out.append(
                "if command -v timeout >/dev/null 2>&1;"
                f" then T='timeout -k 2 {PROBE_TIMEOUT_S}'; fi"
            )
    return "\n".join(out) + "\n"


_END_RE = re.compile(rf"^{END} (\S+) (\d+)(?: missing=(\S+))?@@$")


def split_output(stdout: str) -> dict[str, ProbeOutput]:
    """Cut a script's output back into one ProbeOutput per probe (pure; tested on text).

    A node is not trusted: its control characters (ESC sequences, NUL) are dropped here,
    where every probe's output enters rackcert, so no fact, record or line shows them.
    """
    stdout = strip_controls(stdout)
    found: dict[str, ProbeOutput] = {}
    name: str | None = None
    lines: list[str] = []
    for line in stdout.splitlines():
        if line.startswith(BEGIN + " ") and line.endswith("@@"):
            name, lines = line[len(BEGIN) + 1 : -2], []
            continue
        match = _END_RE.match(line)
        if match and name is not None and name == match.group(1):
            text = "\n".join(lines).rstrip("\n")
            found[name] = ProbeOutput(name, int(match.group(2)), text, match.group(3))
            name = None
            continue
        if name is not None:
            lines.append(line)
    return found
