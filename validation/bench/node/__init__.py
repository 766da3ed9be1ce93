"""What runs on a node: torch and the standard library only, nothing else of rackcert.

- `worker`: the rank's entry point (`python -m validation.bench.node.worker`) under
  torchrun, horovodrun, mpirun or srun; `comm` its collectives (torch.distributed or
  Horovod); `declare` a benchmark's option (declared in its unit's file, sent to the
  worker as data); `tasks` the worker's tasks by name, registered by `allreduce_task` and
  `resnet_task`; `allreduce_loop` and `resnet_loop` the timed loops; `environment` and
  `compilecache` what a rank reports and keeps; `storage` the parallel reader
  (`python -m validation.bench.node.storage DIR`). These are the worker wheel
  (rackcert/configure/worker_wheel.py), installed into the nodes' DL environment.
- `probe` and `pair_allreduce`: self-contained scripts the localisation sends as
  `python -c SOURCE` (no install on the node).

The import-linter contract `bench-node` (pyproject.toml) keeps this package from
importing the controller's side.
"""
