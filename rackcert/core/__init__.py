"""The spine: what every stage shares and nothing above it may be needed to read.

The spec and its rules, GPU placement, the vSphere rules, the spec-to-Ansible table, the
run directory and the stage records. It imports nothing of rackcert's outside itself, so a
stage, the lab, the CLI or an auditor's script can read a run with this package alone; the
contracts in pyproject.toml ([tool.importlinter]) hold it to that.
"""
