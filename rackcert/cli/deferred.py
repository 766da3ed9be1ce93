"""Commands whose parameters typer builds on their first use, not when the app is built.

Why: typer builds every command's click parameters from its signature whenever the app is
built, which is on every invocation. `bench` and `bootstrap` take options and help text from
the benchmark units (validation.bench.units: `rackcert bench`'s per-benchmark flags, the
words `--skip` knows), and importing the units (pydantic record models, launchers,
transports) costs more than the rest of a `rackcert --help` or `rackcert spec check`
together; the test suite starts the CLI a few hundred times. A deferred command is the same
command (name, help, parameters, behaviour): typer sees a stand-in without parameters when
it builds the app, and the real parameters and callback are built the first time anything
asks for them (parsing the command line, its --help, a completion).

    @deferred_command(app, "bench")
    def bench(spec_path: SpecArg, ...) -> None: ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer import _click as click
from typer.core import TyperCommand
from typer.models import CommandInfo

F = TypeVar("F", bound=Callable[..., Any])


class DeferredCommand(TyperCommand):
    """A TyperCommand whose `params` and `callback` are built from `target` when first read."""

    target: Callable[..., Any]  # the real command function, set on each subclass
    pretty_exceptions_short = True
    _built = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._after: list[Callable[[DeferredCommand], None]] = []
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def params(self) -> list[click.Parameter]:
        self._build()
        return self._params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._params = value

    @property  # type: ignore[override]
    def callback(self) -> Callable[..., Any] | None:
        self._build()
        return self._callback

    @callback.setter
    def callback(self, value: Callable[..., Any] | None) -> None:
        self._callback = value

    def after_build(self, fix: Callable[[DeferredCommand], None]) -> None:
        """Run `fix` on the command once its parameters exist (now, if they already do)."""
        if self._built:
            fix(self)
        else:
            self._after.append(fix)

    def _build(self) -> None:
        if self._built:
            return
        # A signature typer refuses raises here, on every use, as it would have when the app
        # was built: the stand-in's empty parameters are never taken for the command's.
        real = typer.main.get_command_from_info(
            CommandInfo(name=self.name, callback=type(self).target),
            pretty_exceptions_short=self.pretty_exceptions_short,
            rich_markup_mode=self.rich_markup_mode,
        )
        self._params, self._callback = real.params, real.callback
        self._built = True
        for fix in self._after:
            fix(self)
        self._after.clear()


def deferred_command(app: typer.Typer, name: str, **kwargs: Any) -> Callable[[F], F]:
    """`app.command(name, **kwargs)`, its signature read when the command is first used."""

    def register(command: F) -> F:
        def stand_in() -> None:  # pragma: no cover - replaced before anything can call it
            raise AssertionError(f"{name}: deferred command called before it was built")

        stand_in.__doc__ = command.__doc__  # the help typer shows when none is given
        short = app.pretty_exceptions_short
        own = {"target": staticmethod(command), "pretty_exceptions_short": short}
        cls = type(f"Deferred_{command.__name__}", (DeferredCommand,), own)
        app.command(name, cls=cls, **kwargs)(stand_in)
        return command

    return register
