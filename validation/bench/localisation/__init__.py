"""Localisation: which node, GPU or link holds the rack back (`rackcert bench --localise`).

- `stages`: the per-node and per-link stages and the record block they write;
- `srun`: the same stages as Slurm job steps;
- `schedule`: rounds of disjoint pairs; `linkprobe`: iperf3 and ib_write_lat command
  lines and their figures;
- `outliers` and `findings`: the rules (absolute threshold, the rack's own median);
  `colocated`: units that share a host; `confirm`: a named part measured once more;
- `drain`: a finding as a Slurm drain reason.
"""
