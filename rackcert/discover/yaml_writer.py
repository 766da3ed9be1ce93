"""Spec dict + comments -> YAML text that reads like the hand-written examples.

Why ruamel.yaml: it writes comments and keeps key order, so a discovered draft can say
where each value came from and what is still a placeholder, and reads like
inventories/r750xa-4node.yaml: block style, one flow-style line per GPU, NIC, host and
VM, PCI addresses in double quotes (a YAML 1.1 reader would take 0000:17:00.0 for a
sexagesimal float). Output depends on its input only: no timestamps, no dict-order
surprises, so re-running discover on an unchanged rack gives a byte-identical file.

Example:
    notes = Notes()
    notes.before(("hosts",), "one line per ESXi host")
    text = render({"apiVersion": "rackcert/v1", "hosts": [...]}, notes, header=["draft"])
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

Path = tuple[str | int, ...]

# Items written as one flow-style line, as in the examples ("*" = any list index).
_FLOW = {
    ("hardware_profiles", "*", "gpus", "*"),
    ("hardware_profiles", "*", "nics", "*"),
    ("hosts", "*"),
    ("vms", "*"),
}
_QUOTE = re.compile(r"^([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]|[-+]?[0-9_]*\.?[0-9_]+)$")


@dataclass
class Notes:
    """Comments keyed by the path of the value they belong to."""

    _before: dict[Path, list[str]] = field(default_factory=dict)
    _eol: dict[Path, str] = field(default_factory=dict)

    def before(self, path: Path, *lines: str) -> None:
        """Comment lines above the key (or list item) at `path`; "" is a blank line."""
        self._before.setdefault(path, []).extend(lines)

    def eol(self, path: Path, text: str) -> None:
        """A comment at the end of the line of the key at `path`."""
        self._eol[path] = text

    def before_of(self, path: Path) -> list[str]:
        return list(self._before.get(path, []))

    def eol_of(self, path: Path) -> str | None:
        return self._eol.get(path)


def _pattern(path: Path) -> tuple[str, ...]:
    return tuple("*" if isinstance(p, int) else p for p in path)


def _scalar(value: Any) -> Any:
    if isinstance(value, str) and _QUOTE.fullmatch(value):
        return DoubleQuotedScalarString(value)
    return value


def _build(value: Any, path: Path) -> Any:
    if isinstance(value, dict):
        node = CommentedMap()
        for key, item in value.items():
            node[key] = _build(item, (*path, key))
        if _pattern(path) in _FLOW:
            node.fa.set_flow_style()
        return node
    if isinstance(value, list):
        seq = CommentedSeq(_build(item, (*path, i)) for i, item in enumerate(value))
        if all(not isinstance(i, dict | list) for i in value) and value:
            seq.fa.set_flow_style()
        return seq
    return _scalar(value)


def _comment_text(lines: list[str]) -> str:
    # ruamel prefixes every line with "# "; an empty string yields a blank line.
    return "\n".join(lines)


def _attach(node: Any, path: Path, notes: Notes, depth: int) -> None:
    """Attach notes to the children of `node` (a map or seq at `path`, nesting `depth`)."""
    if isinstance(node, CommentedMap):
        keys = list(node.keys())
        items = [(k, (*path, k)) for k in keys]
    elif isinstance(node, CommentedSeq):
        items = [(i, (*path, i)) for i in range(len(node))]
    else:
        return
    indent = 2 * depth
    for key, child_path in items:
        before = notes.before_of(child_path)
        if before:
            node.yaml_set_comment_before_after_key(key, before=_comment_text(before), indent=indent)
        eol = notes.eol_of(child_path)
        if eol and isinstance(node, CommentedMap):
            node.yaml_add_eol_comment(eol, key)
        child = node[key]
        if isinstance(child, CommentedMap | CommentedSeq) and not child.fa.flow_style():
            # A list nested in a map is indented by its item offset (2) under the key.
            _attach(child, child_path, notes, depth + 1)


def render(data: dict[str, Any], notes: Notes | None = None, header: list[str] = ()) -> str:
    """The YAML text of `data` with `notes` and a `header` comment block."""
    notes = notes or Notes()
    root = _build(data, ())
    _attach(root, (), notes, 0)
    if header:
        root.yaml_set_start_comment(_comment_text(list(header)))
    yaml = YAML(typ="rt", pure=True)
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # one line per flow item, like the examples
    # A drafted spec must pass `spec check`, which refuses anchors and aliases.
    yaml.representer.ignore_aliases = lambda *_args: True
    out = io.StringIO()
    yaml.dump(root, out)
    return out.getvalue()
