"""The worker's tasks by name: each benchmark's node side registers its own (`@task`).

Why: the worker (validation.bench.node.worker) ran its tasks through an if-chain naming
each benchmark, so adding one meant editing it. A task is now a function of the ranks'
collectives and the parsed arguments, registered under the name its unit asks for
(`BenchUnit.tasks`), in the node module beside the loop it times: every module of this
package named `*_task` (allreduce_task, resnet_task) registers when the worker starts, and a
unit whose node side lives elsewhere names its module (`BenchUnit.task_module`, passed as
`--task-module`). Standard library only: the worker loads the modules after the compile
cache is set up, before torch is imported by a task module's loop.

    @task("allreduce")
    def allreduce(comm, args): return {"points": ...}
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import Any

# (the ranks' collectives, validation.bench.node.comm.Comm; the worker's arguments)
Task = Callable[[Any, argparse.Namespace], Any]

TASKS: dict[str, Task] = {}
SUFFIX = "_task"  # this package's modules that register tasks


def task(name: str) -> Callable[[Task], Task]:
    """Register the decorated function as the worker task `name` (its answer is the
    result's key `name`); a second function under one name is refused."""

    def register(fn: Task) -> Task:
        known = TASKS.get(name)
        if known is not None and known.__qualname__ != fn.__qualname__:
            raise ValueError(f"worker task {name!r} is registered twice ({fn.__module__})")
        TASKS[name] = fn
        return fn

    return register


def given(args: argparse.Namespace, name: str) -> Any:
    """A declared option's value; None when the launch did not pass it."""
    return getattr(args, name, None)


def load(extra: Iterable[str] = ()) -> dict[str, Task]:
    """Import this package's `*_task` modules and the `extra` ones (each registers its
    tasks), then the tasks by name."""
    package = __name__.rsplit(".", 1)[0]
    here = importlib.import_module(package)
    own = [f"{package}.{m.name}" for m in pkgutil.iter_modules(here.__path__)]
    for module in [m for m in own if m.endswith(SUFFIX)] + list(extra):
        importlib.import_module(module)
    return dict(TASKS)
