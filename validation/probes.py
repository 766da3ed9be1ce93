"""The script a node is asked: every fact's command, sent as ONE script per node.

A check never talks to a node itself. The command of every fact class the selected
checks read (validation.facts) is put into one POSIX shell script, run once per
node over testinfra (one SSH session per node instead of one per command: that is
what keeps 16 nodes close to the time of one), and the output is cut back into
one `ProbeOutput` per fact by the markers the script prints. A fact names the tool
it needs; when the tool is not on the node's PATH the script says so instead of
running it, so a missing `nvidia-smi` is an answer ("nvidia-smi not found"), not a
crash.

    >>> script = build_script([LinuxDistribution, Ofed], expect)
    >>> outputs = split_output(host.run(script).stdout)
    >>> outputs["os"].text
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from pyinfra.api import FactBase

from rackcert.core.untrusted import strip_controls
from validation.expect import NodeExpect
from validation.facts import Fact, command_of, key_of

BEGIN = "@@rackcert-probe-begin"
END = "@@rackcert-probe-end"
PROBE_TIMEOUT_S = 30


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


def build_script(
    facts: Iterable[type[FactBase]], expect: NodeExpect, tool_path: str | None = None
) -> str:
    """One sh script running every fact's command with markers, a time limit and a
    missing-tool guard; stdout and stderr together, as a person at the node would see."""
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    prefix = f"{shlex.quote(tool_path)}:" if tool_path else ""
    common = (
        "if command -v timeout >/dev/null 2>&1;"
        f" then T='timeout -k 2 {PROBE_TIMEOUT_S}'; else T=; fi"
    )
    out = [f'export LC_ALL=C PATH={prefix}"$PATH":{path}', common]
    for cls in facts:
        key = key_of(cls)
        body = shlex.quote(command_of(cls, expect))
        limit = cls.timeout_s(expect) if issubclass(cls, Fact) else None
        if limit is not None:  # its own limit, for this fact only
            out.append(f"if command -v timeout >/dev/null 2>&1; then T='timeout -k 2 {limit}'; fi")
        out.append(f"echo '{BEGIN} {key}@@'")
        tool = cls().requires_command()
        err = "2>&1" if getattr(cls, "stderr", True) else "2>/dev/null"
        if tool:
            q = shlex.quote(tool)
            out.append(
                f"if ! command -v {q} >/dev/null 2>&1; then echo '{END} {key} 127"
                f" missing={tool}@@'; else $T sh -c {body} </dev/null {err};"
                f" printf '\\n{END} {key} %s@@\\n' $?; fi"
            )
        elif getattr(cls, "quick", False):  # no limit, no second shell (Fact.quick)
            out.append(f"( {command_of(cls, expect)}\n) </dev/null {err}")
            out.append(f"printf '\\n{END} {key} %s@@\\n' $?")
        else:
            out.append(f"$T sh -c {body} </dev/null {err}; printf '\\n{END} {key} %s@@\\n' $?")
        if limit is not None:  # back to the common limit
            out.append(common)
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
