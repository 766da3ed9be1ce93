"""Which Ansible strategy plugin runs site.yml: Mitogen's linear strategy by default.

Why Mitogen: with Ansible's own strategies every task on every node starts a fresh Python
there, unpacks the task's AnsiballZ payload and compiles ansible-core's module_utils from it
again (a zip import writes no bytecode); a site.yml run is ~150 tasks a node. Mitogen for
Ansible (https://mitogen.networkgenomics.com/ansible_detailed.html) keeps one Python per node
for the run, over the same SSH connection and the same become method, and runs each module in
it, with the plays, tasks and results unchanged: its `mitogen_linear` is Ansible's `linear`
with that connection layer. Measured on two SSH test hosts (tests/integration/
test_configure_site.py, two site.yml runs, 2 cores): 125.4 CPU-s with `linear`, 82.7 with
`mitogen_linear` (0.66x), the same assertions passing.

`guest.ansible_strategy: linear` runs Ansible's own strategy (a node whose Python Mitogen
cannot drive, or to rule Mitogen out when a run misbehaves); the run record names the one
that ran. ansible-core 2.19 deprecates strategy plugins from outside ansible.builtin (it warns
that a future release removes them; pyproject.toml keeps ansible-core below 2.20): when one
does, `linear` is the way on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rackcert.core.errors import InputError

MITOGEN = "mitogen_linear"


def strategy_envvars(strategy: str) -> dict[str, str]:
    """ANSIBLE_STRATEGY (and, for Mitogen, where its strategy plugins live) for ansible-playbook.

    Mitogen's plugins are found through the installed `ansible_mitogen` package, the way its
    documentation says to configure them (strategy_plugins pointing at
    ansible_mitogen/plugins/strategy), so no ansible.cfg of the operator's is needed or read.
    """
    if strategy != MITOGEN:
        return {"ANSIBLE_STRATEGY": strategy}
    found = importlib.util.find_spec("ansible_mitogen")
    if found is None or found.origin is None:
        raise InputError(
            "guest.ansible_strategy: mitogen_linear needs the mitogen package"
            " (pip install mitogen), or set guest.ansible_strategy: linear"
        )
    plugins = Path(found.origin).parent / "plugins" / "strategy"
    return {"ANSIBLE_STRATEGY_PLUGINS": str(plugins), "ANSIBLE_STRATEGY": MITOGEN}
