"""The benchmarks' own options as typer options, built from their declarations.

Why: each benchmark declares its options once, in its unit's file (`BenchUnit.options`,
validation.bench.node.declare.Opt); `rackcert bench` must offer every one of them with its
whole help, and a unit added to validation.bench.units.UNITS must appear without this CLI
being edited. `with_unit_options(command)` gives the command one keyword-only parameter
per declared option (typer reads the signature when the app is built, so it sees UNITS as
they are then) and hands the command their values as one dict, `unit_values`, the shape
BenchOptions keeps them in.

    @app.command("bench")
    @with_unit_options
    def bench(spec_path: SpecArg, *, unit_values: dict[str, Any]) -> None: ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from validation.bench.node.declare import Opt

_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool, "path": Path}
VALUES = "unit_values"


def skip_list() -> str:
    """The benchmarks' words `--skip` knows (validation.bench.units.UNITS), comma-joined, for
    bench's and bootstrap's help: read when typer reads their signatures (on first use,
    rackcert.cli.deferred), so a new unit is in both."""
    from validation.bench.units import skip_words

    return ",".join(skip_words())


def typer_parameter(opt: Opt) -> inspect.Parameter:
    """One declared option as a keyword-only parameter typer turns into a click option."""
    if opt.kind == "bool":
        info = typer.Option(f"{opt.flag}/{opt.no_flag}", help=opt.help)
    else:
        info = typer.Option(opt.flag, help=opt.help, min=opt.minimum)
    kind = _TYPES[opt.kind]
    annotation = Annotated[kind if opt.default is not None else kind | None, info]  # type: ignore[valid-type]
    return inspect.Parameter(
        opt.name, inspect.Parameter.KEYWORD_ONLY, default=opt.default, annotation=annotation
    )


def declared() -> list[Opt]:
    from validation.bench.units import declared_options

    return list(declared_options().values())


class _WithUnitOptions:
    """The command, whose signature also names every declared option (read when asked)."""

    def __init__(self, command: Callable[..., Any]) -> None:
        functools.update_wrapper(self, command)
        self._command = command

    @property
    def __signature__(self) -> inspect.Signature:
        own = inspect.signature(self._command, eval_str=True)
        params = [p for p in own.parameters.values() if p.name != VALUES]
        return own.replace(parameters=[*params, *(typer_parameter(o) for o in declared())])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        names = {o.name for o in declared()}
        values = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
        return self._command(*args, **kwargs, **{VALUES: values})


def with_unit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` with one option per declared benchmark option; their values arrive as
    `unit_values` (name -> value, None where not given)."""
    return _WithUnitOptions(command)
