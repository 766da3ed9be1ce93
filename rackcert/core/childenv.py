"""The environment every child process starts with: a short named list, never ours whole.

rackcert's own environment may hold the vCenter password variable, a become
password variable, cloud credentials of the operator's shell. A child (Ansible,
the check suite) gets only the variables named here plus what the caller adds,
so none of that can reach a command line or a remote node through it.

Example:
    subprocess.Popen(cmd, env=child_env({"PYTHONPATH": root}))
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# What a POSIX program and OpenSSH need to behave as they would in the operator's shell.
PASSED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "TMPDIR",
    "SSH_AUTH_SOCK",  # the operator's ssh-agent: keys stay in the agent, never in a variable
    "VIRTUAL_ENV",
    # The lab's owner tag (rackcert.lab.lifetime): a run that owns a lab stops every process
    # that carries it when it ends, on a signal too; Ansible and what it starts are among them.
    "RACKCERT_LAB_OWNER",
)


def child_env(
    extra: Mapping[str, str] | None = None,
    *,
    withheld: Iterable[str | None] = (),
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """PASSED variables from `base` (default: this process), then `extra`; `withheld` never.

    Args:
        extra: variables the child needs (PYTHONPATH, ANSIBLE_*); they win over `base`.
        withheld: names that must not reach the child even if `extra` names them (the
            spec's password_env, --become-password-env).
        base: the environment to take PASSED variables from.
    """
    source = os.environ if base is None else base
    env = {k: source[k] for k in PASSED if k in source}
    env.update(extra or {})
    for name in withheld:
        if name:
            env.pop(name, None)
    return env


def secret_variables(spec: object | None = None, *more: str | None) -> list[str]:
    """Names of the variables that hold secrets for this run: never passed to a child."""
    names = [n for n in more if n]
    vcenter = getattr(spec, "vcenter", None)
    if vcenter is not None and getattr(vcenter, "password_env", None):
        names.append(vcenter.password_env)
    return names
