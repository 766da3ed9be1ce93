"""The rolling upgrade: a certified rack moved to new versions node by node, in service.

A stage like the others: it imports only the spine (rackcert.core). What it decides is
pure (layers.py: which layers change; refusals.py: what it will not do; budget.py: waves
within what the scheduler can lose; plan.py: the plan `--plan` prints; judge.py: whether a
node came back no worse). What touches the world goes through the ports in ports.py
(scheduler, hypervisor, host image, guest, certifier); machine.py drives one state machine
per host and its VMs through them and records every transition in `upgrade.json`. The
flows floor (rackcert.rollout) builds the real ports from provision, configure and
validation.
"""
