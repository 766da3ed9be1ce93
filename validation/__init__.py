"""The validation stage: what the rack's guests and hypervisors really are, against the spec.

Layout, one job per module:

- `probes`      the shell commands a node is asked, sent as ONE script per node (facts).
- `parsers`     pure functions turning those outputs into values (tested on captured output).
- `expect`      what each node must be, derived from the spec and `rackcert.placement`.
- `checks/`     the judges: one small function per check id, by area (gpu, nic, os, ...).
- `suite/`      the pytest module and plugin that run the checks through testinfra.
- `runner`      the fan-out: all nodes in one parallel pass, rich progress, results.
- `hypervisor`  checks over provision's recorded discovery (ATS, passthrough, MMIO, ...).
- `facts`       the pyinfra facts snapshot (facts.json) the report keeps.
- `junit`       JUnit XML for CI systems.

`validation` never imports `provision`; both read `rackcert.*`.
"""


def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - validation.stage.run's signature
    """The validate stage (validation.stage.run), importable as `validation.run`."""
    from validation.stage import run as _run

    return _run(*args, **kwargs)
