"""The pytest side of validate: a plugin and one parametrised test module.

The runner starts `python -m pytest validation/suite/test_checks.py -p
validation.suite.plugin --rackcert-job JOB`; the plugin gathers every node's
probes in parallel (threads, one testinfra SSH session per node), then pytest
runs one test per (node, check) that judges the gathered outputs and appends
the CheckResult to the job's events file, which the runner reads live for its
progress display.
"""
