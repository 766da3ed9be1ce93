"""facts.json: every gathered fact's typed value per node, from the checks' own session.

Facts are not judged here: they are what the nodes were when validate ran, so that
`rackcert report diff` can say what changed after an upgrade. The document records
exactly the fact classes the run gathered (the selected checks' facts, plus the
report's snapshot unless `--no-facts`), each parsed once: the values the checks
judged are the values recorded. As in pyinfra, a missing tool, a failed command or
no output gives the fact's default; a fact whose output cannot be parsed is kept
out under `fact_errors` and the others stay.

    >>> build_facts({"node1": view}, {}, facts=[GpuQuery, Mounts], seconds=1.2)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pyinfra.api import FactBase

from validation.checks import NodeView
from validation.facts import key_of


def value(view: NodeView, cls: type[FactBase]) -> Any:
    """A fact as pyinfra's get_facts gives it: its default unless the command answered."""
    out = view.output(cls)
    if out is None or not out.ok or not out.text:
        return cls.default()
    return view.parsed(cls)


def build_facts(
    views: dict[str, NodeView],
    errors: dict[str, str],
    *,
    facts: Sequence[type[FactBase]],
    seconds: float,
) -> dict[str, Any]:
    """The facts.json document: reached nodes' facts, unreached nodes' `error`."""
    nodes: dict[str, Any] = {node: {"error": why} for node, why in errors.items()}
    for node, view in views.items():
        got: dict[str, Any] = {}
        for cls in facts:
            key = key_of(cls)
            try:
                got[key] = jsonable(value(view, cls))
            except Exception as exc:  # noqa: BLE001 - one bad fact must not lose the others
                got.setdefault("fact_errors", {})[key] = f"{type(exc).__name__}: {exc}"
        nodes[node] = got
    return {
        "collector": "validate probe script, one SSH session per node",
        "facts": [key_of(cls) for cls in facts],
        "seconds": seconds,
        "nodes": nodes,
    }


_SCALARS = (str, int, float, bool, type(None))


def jsonable(obj: Any) -> Any:
    """A typed fact value as JSON data (dataclasses become objects, sets sorted lists).

    Dispatches on the exact type first: package lists and sysctl hold thousands of plain
    strings per node, and this runs for every node of the rack.
    """
    kind = type(obj)
    if kind in _SCALARS:
        return obj
    if kind is dict:
        return {str(k): v if type(v) in _SCALARS else jsonable(v) for k, v in obj.items()}
    if kind is set or kind is frozenset:
        items = [v if type(v) in _SCALARS else jsonable(v) for v in obj]
        return sorted(items, key=str)
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else jsonable(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if isinstance(obj, _SCALARS):
        return obj
    return str(obj)
