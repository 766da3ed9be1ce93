"""Storage checks: the training-data mount exists with the spec's source and options."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.facts.system import Mounts

# Options that shape how a mount is made but never show up in /proc/self/mountinfo.
_INVISIBLE = {"bind", "rbind", "defaults", "auto", "noauto", "_netdev", "nofail", "user"}


def _normalise(option: str) -> str:
    # The kernel reports vers=3 as vers=3, but nfsvers=3 as vers=3 too.
    return option.replace("nfsvers=", "vers=")


@check("storage.mount", facts=(Mounts,))
def mount(view: NodeView) -> Outcome:
    """storage.nfs.mount_point is mounted from the spec's export with every option it lists.

    Fix: mount it as the spec says (role storage_nfs): mount -o vers=3,nconnect=8 srv:/export.
    """
    want = view.expect.mount
    if want is None:
        return skipped("storage.nfs is not set in the spec")
    mounts = [m for m in view.fact(Mounts) if m.mount_point == want.mount_point]
    expected = f"{want.source} on {want.mount_point} ({want.fstype}) {','.join(want.options)}"
    if not mounts:
        return failed(f"nothing mounted on {want.mount_point}", expected, "mount missing")
    m = mounts[-1]  # the last one mounted there is the one processes see
    observed = f"{m.source}:{m.root} on {m.mount_point} ({m.fstype}) {','.join(sorted(m.options))}"
    if want.fstype == "none":
        # mountinfo's root is relative to the source filesystem: /tmp on a tmpfs shows
        # /x/export for /tmp/x/export, so the export must end with it.
        root, export = m.root.rstrip("/"), want.source.rstrip("/")
        if not root or not (export == root or export.endswith(root)):
            return failed(observed, expected, f"bind mount of {m.root}, not {want.source}")
    else:
        if not m.fstype.startswith("nfs"):
            return failed(observed, expected, f"mounted as {m.fstype}, not NFS")
        if m.source.rstrip("/") != want.source.rstrip("/"):
            return failed(observed, expected, f"mounted from {m.source}, not {want.source}")
    have = {_normalise(o) for o in m.options}
    missing = [o for o in want.options if o not in _INVISIBLE and _normalise(o) not in have]
    if missing:
        return failed(observed, expected, f"mount options missing: {','.join(missing)}")
    return passed(observed, expected)
