"""The validation stage: what the rack's guests and hypervisors really are, against the spec.

Layout, one job per module:

- `facts/`     what a node is asked: one pyinfra-shaped class per observation (command,
                tool, pure parse into a typed value); checks declare the ones they read.
- `probes`      those facts' commands as ONE script per node, cut back per fact.
- `parsers`     pure functions turning outputs into values (tested on captured output).
- `expect`      what each node must be, derived from the spec and `rackcert.core.placement`.
- `checks/`     the judges: one small function per check id, by area (gpu, nic, os, ...).
- `peers`       which peers ssh.peers checks: ring neighbours + k, rotating (not n^2).
- `suite/`      the pytest module and plugin that run the checks through testinfra
                (`pytest --hosts=... --rackcert-spec SPEC validation/suite` works too).
- `runner`      the fan-out: all nodes in one parallel pass, rich progress, results.
- `hypervisor`  checks over provision's recorded discovery (ATS, passthrough, MMIO, ...).
- `snapshot`    facts.json: the gathered facts' values, as the checks judged them.
- `junit`       JUnit XML for CI systems.

`validation` never imports `provision`; both read `rackcert.*`.
"""


def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - validation.stage.run's signature
    """The validate stage (validation.stage.run), importable as `validation.run`."""
    from validation.stage import run as _run

    return _run(*args, **kwargs)
