"""Write docs/spec-reference.md (from the pydantic models) and docs/checks.md (from the suite).

Both are generated so they cannot drift from the code; tests/unit/test_reference_docs.py
fails when a checked-in copy is stale. Run: .venv/bin/python tools/gen_reference.py
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel

from rackcert.core import spec as spec_models

ROOT = Path(__file__).resolve().parents[1]
SPEC_DOC = ROOT / "docs" / "spec-reference.md"
CHECKS_DOC = ROOT / "docs" / "checks.md"


def _type_name(annotation: object) -> str:
    """A short, stable type name: Annotated metadata (with its addresses) left out."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _nested(annotation: object) -> list[type[BaseModel]]:
    found = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    for arg in typing.get_args(annotation):
        found += _nested(arg)
    return found


def _default(field) -> str:  # noqa: ANN001 - pydantic FieldInfo
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(defaults below)"
        return f"`{value!r}`"
    value = field.default
    return f"`{getattr(value, 'value', value)!r}`"


def spec_reference() -> str:
    lines = [
        "# Spec reference",
        "",
        "Generated from `rackcert/core/spec.py` by `tools/gen_reference.py`; do not edit by hand.",
        "Unknown keys are errors everywhere; `rackcert spec schema` prints it as JSON Schema.",
        "",
    ]
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("(top level)", spec_models.Spec)]
    while queue:
        where, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        doc = (model.__doc__ or "").strip().splitlines()
        lines += [f"## `{model.__name__}` — {where}", ""]
        if doc and not doc[0].startswith("Base"):
            lines += [doc[0], ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            kind = _type_name(field.annotation)
            desc = (field.description or "").replace("|", "/")
            lines.append(f"| `{name}` | {kind} | {_default(field)} | {desc} |")
            for sub in _nested(field.annotation):
                queue.append((f"`{model.__name__}.{name}`", sub))
        lines.append("")
    return "\n".join(lines)


def checks_reference() -> str:
    from validation.checks import listed

    lines = [
        "# Checks",
        "",
        "Generated from the validation suite by `tools/gen_reference.py`; do not edit by hand.",
        "`rackcert validate --list` prints the same table.",
        "",
        "Scope: `node` checks judge a guest over SSH; `host`, `vm` and `rack` checks judge the",
        "ESXi hosts, the VMs and the rack as provision's recorded discovery saw them.",
        "",
        "| id | severity | scope | expects | fix |",
        "|---|---|---|---|---|",
    ]
    for d in listed():
        cells = [d.id, d.severity.value, d.scope, d.summary, d.fix]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    SPEC_DOC.parent.mkdir(exist_ok=True)
    SPEC_DOC.write_text(spec_reference())
    CHECKS_DOC.write_text(checks_reference())
    print(f"wrote {SPEC_DOC.relative_to(ROOT)} and {CHECKS_DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
