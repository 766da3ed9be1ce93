"""Configure stage: the guest OS layer through Ansible (inventory, runner, record, display)."""
