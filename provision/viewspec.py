"""The PropertyCollector filter that reads objects of given types through a view.

Why one place: discovery, the maintenance marks, the boot waits' watch and the lab's guest
agent all read "these properties of every object in this view" the way the vSphere Web
Services SDK's programming guide shows: an ObjectSpec on the view (a ContainerView or a
ListView) that skips the view itself and a TraversalSpec through its `view` property to the
objects it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def view_filter_spec(view: Any, paths: Mapping[Any, Sequence[str]], **options: Any) -> Any:
    """A FilterSpec for `paths` ({managed type: property paths}) of every object in `view`
    (a pyVmomi ContainerView or ListView: the traversal goes through its own type's `view`);
    `options` are FilterSpec fields (reportMissingObjectsInResults)."""
    from pyVmomi import vmodl

    pc = vmodl.query.PropertyCollector
    traverse = pc.TraversalSpec(name="view", path="view", skip=False, type=type(view))
    return pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[traverse])],
        propSet=[pc.PropertySpec(type=kind, pathSet=list(p)) for kind, p in paths.items()],
        **options,
    )
