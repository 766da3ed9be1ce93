"""`rackcert spec discover`: turn what vCenter (and the guests) report into a spec draft.

Pure steps, each in its own module, so each is tested on objects built in the test:
catalog (PCI ids and server models, data in catalog/*.yaml), hardware (one ObservedHost
-> GPUs, NICs, catalog NVLink pairs), inventory_to_spec (hosts -> spec dict and
comments), topo (`nvidia-smi topo -m` -> NVLink pairs on host PCI addresses),
yaml_writer (spec dict -> commented YAML), drift (spec in use vs. discovered hardware).
Only `nodes` (SSH to the VMs) and the CLI touch the outside world.
"""
