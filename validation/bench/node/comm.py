"""One face for the two distributed engines a bench worker can run under.

Why: the allreduce sweep and the ResNet50 loop must produce the same numbers whether
Horovod (`hvd.allreduce`, `hvd.DistributedOptimizer`) or torch.distributed (NCCL on
GPUs, Gloo on CPUs, DDP) moves the bytes; each engine answers the same few questions
here. torch and horovod are imported lazily so the orchestration side never needs them.
"""

from __future__ import annotations

import os
import time
from typing import Any

START_CHECKED = "same on every rank (SHA-256 of weights and optimizer state compared)"
START_BROADCAST = "broadcast from rank 0 (the ranks' weights differed)"
# How long a Horovod rank naps between polls of its allreduce where its machine's cores are
# shared (HorovodComm.rank_wait): short beside a CPU call's own time (the lab's: 10-100 ms).
POLL_NAP_S = 0.0005


def machine_id() -> str:
    """The running kernel's boot_id (proc(5)): ranks that share it share one machine's cores
    (the lab's nodes are network namespaces of one machine); the host name without it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or os.uname().nodename
    except OSError:
        return os.uname().nodename


def ranks_over_cores(machines: list[str], mine: str, cores: int) -> int | None:
    """How many ranks run on this machine when they outnumber its cores, else None."""
    here = sum(1 for m in machines if m == mine)
    return here if here > cores else None


class Comm:
    """The questions a benchmark asks of its engine; subclasses answer them per engine."""

    backend: str = "?"
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: Any = None
    data_parallel: str = "none"  # what wrap() did: DDP, horovod, or none (one rank)
    wraps_optimizer: bool = False  # wrap() replaced the optimizer (Horovod's)
    # how wrap() made the start the same on every rank (start_sync), for the result
    start_sync: str = "one rank"
    # how a rank waits for its allreduce where the engine leaves that to the caller (Horovod);
    # None where the engine's own call blocks (torch.distributed)
    rank_wait: str | None = None

    def allreduce_(self, tensor: Any) -> None:
        """Sum `tensor` in place over all ranks; returns when the result is usable."""
        raise NotImplementedError

    def allgather_floats(self, values: list[float]) -> list[list[float]]:
        """Every rank's list of floats (all the same length), indexed by rank."""
        raise NotImplementedError

    def allgather_object(self, obj: Any) -> list[Any]:
        """Every rank's picklable object, indexed by rank (small things only: host names)."""
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError

    def wrap(self, model: Any, optimizer: Any) -> tuple[Any, Any]:
        """Make training data-parallel: same start weights everywhere, gradients averaged."""
        raise NotImplementedError

    def same_start(self, model: Any, optimizer: Any) -> bool:
        """Whether every rank already holds the same weights and optimizer state.

        Why: every rank builds the model from the same seed (resnet_loop._build), so the
        usual broadcast from rank 0 moves ResNet50's ~100 MB (Horovod: twice, weights then
        momentum) only to overwrite them with equal bytes; over a 100 Mbit/s link that was
        most of a two-node CPU launch's start (the lab's demo). A SHA-256 of every tensor,
        compared across ranks (a few bytes each), proves them equal; where they differ
        (other torch builds on the nodes) wrap() broadcasts as before.
        """
        import hashlib

        import torch

        digest = hashlib.sha256()
        tensors = list(model.state_dict().values())
        for state in optimizer.state_dict()["state"].values():
            tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
        for t in tensors:
            digest.update(str((t.dtype, tuple(t.shape))).encode())
            digest.update(t.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
        mine = digest.hexdigest()
        return all(other == mine for other in self.allgather_object(mine))

    def step(self, optimizer: Any, scaler: Any | None) -> None:
        """One optimizer step, through the gradient scaler when mixed precision needs one."""
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()

    def close(self) -> None:
        """Leave the process group cleanly (so the launcher sees a clean exit)."""

    def synchronize(self) -> None:
        """Wait for the device to finish queued work (timers stop only after it)."""
        import torch

        if self.device is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _pick_device(want: str, local_rank: int) -> Any:
    import torch

    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda asked but torch sees no CUDA device")
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _from_open_mpi() -> None:
    """Ranks started by mpirun (the second launcher): torch's env:// rendezvous reads
    RANK/WORLD_SIZE/LOCAL_RANK, Open MPI sets OMPI_COMM_WORLD_*; MASTER_ADDR/PORT come
    from the launcher's -x."""
    for ours, theirs in (
        ("RANK", "OMPI_COMM_WORLD_RANK"),
        ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"),
        ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ):
        if ours not in os.environ and theirs in os.environ:
            os.environ[ours] = os.environ[theirs]


class TorchComm(Comm):
    """torch.distributed from torchrun's environment (env:// rendezvous): NCCL or Gloo."""

    def __init__(self, device: str = "auto") -> None:
        import torch.distributed as dist

        _from_open_mpi()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = _pick_device(device, self.local_rank)
        self.backend = "nccl" if self.device.type == "cuda" else "gloo"
        if not dist.is_initialized():
            kwargs: dict[str, Any] = {"backend": self.backend}
            if self.device.type == "cuda":
                kwargs["device_id"] = self.device
            dist.init_process_group(**kwargs)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def allreduce_(self, tensor: Any) -> None:
        import torch.distributed as dist

        dist.all_reduce(tensor)

    def allgather_floats(self, values: list[float]) -> list[list[float]]:
        import torch
        import torch.distributed as dist

        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(out, mine)
        return [t.cpu().tolist() for t in out]

    def allgather_object(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.device.type == "cuda":
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    def wrap(self, model: Any, optimizer: Any) -> tuple[Any, Any]:
        """DDP across ranks; nothing at world size 1, where there is no gradient to average
        and DDP would only add its bucket copies, hooks and a 1-rank allreduce per step
        (and split a compiled model into one graph per bucket)."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        if self.world_size == 1:
            self.data_parallel = "none (1 rank)"
            return model, optimizer
        self.data_parallel = "DDP"
        ids = [self.device.index] if self.device.type == "cuda" else None
        same = self.same_start(model, optimizer)
        self.start_sync = START_CHECKED if same else START_BROADCAST
        # broadcast_buffers=False: no per-step broadcast of BatchNorm statistics (Horovod does
        # not sync them either); they only matter for evaluation, which a benchmark never does.
        # init_sync=False: no broadcast of weights every rank already holds (same_start).
        ddp = DDP(
            model,
            device_ids=ids,
            gradient_as_bucket_view=True,
            broadcast_buffers=False,
            init_sync=not same,
        )
        return ddp, optimizer

    def close(self) -> None:
        """Tear down in order: the device's queued work, then a barrier (every rank has
        finished every collective, so no peer is still reading a socket or a ring buffer
        when one leaves), then every process group (the default one last, as
        destroy_process_group(None) does). Without the barrier a Gloo rank that leaves
        first closes its pairs under a peer still in its last collective, and that peer's
        transport thread can abort the process (SIGABRT) after its result was printed."""
        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            self.synchronize()
            self.barrier()
        finally:
            dist.destroy_process_group()


class HorovodComm(Comm):
    """Horovod (`horovodrun --gloo` or MPI): hvd.allreduce and DistributedOptimizer."""

    def __init__(self, device: str = "auto") -> None:
        import horovod.torch as hvd

        if "SLURM_PROCID" in os.environ and not hvd.mpi_built():
            # Under srun no horovodrun hands out a Gloo rendezvous: the ranks meet through
            # MPI_Init, and a Gloo-only build would wait for a rendezvous that never comes.
            raise RuntimeError(
                "Horovod here was built without MPI; under srun its ranks meet through MPI:"
                " rebuild it with HOROVOD_WITH_MPI=1 against the nodes' Open MPI"
            )
        hvd.init()
        self._hvd = hvd
        self.rank, self.world_size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        self.device = _pick_device(device, self.local_rank)
        self.backend = "horovod"
        self._count = 0
        self.poll_nap_s = 0.0
        self.rank_wait = "hvd.synchronize (Horovod's own: a sched_yield loop)"
        if self.device.type == "cpu" and self.world_size > 1:
            self._nap_where_cores_shared()

    def _nap_where_cores_shared(self) -> None:
        """Where more ranks share this machine than it has cores (the lab), wait for each
        allreduce by polling its handle with POLL_NAP_S naps instead of hvd.synchronize.

        Why: Horovod 0.28's synchronize waits in a sched_yield loop, a thread that stays
        runnable for the whole call. On a rack each rank has cores of its own and that loop
        costs nothing; on shared cores the four waiting ranks took them from the threads
        that move the bytes (Horovod's background thread, Gloo's): in the lab an 8-byte call
        took 12-100 ms and busbw read 0.48-0.98 of the line rate run to run, with the same
        bytes on the link as torch.distributed (benchmarks/allreduce_paths.py, docs/lab.md).
        Napping leaves the cores to the bytes, as dedicated cores would; the record says
        which wait ran (rank_wait)."""
        mine = machine_id()
        cores = os.cpu_count() or 1
        here = ranks_over_cores(list(self._hvd.allgather_object(mine)), mine, cores)
        if here is None:
            return
        self.poll_nap_s = POLL_NAP_S
        self.rank_wait = (
            f"poll every {POLL_NAP_S * 1000:g} ms ({here} ranks share this machine's"
            f" {cores} cores; hvd.synchronize's sched_yield loop would take them from the"
            " bytes)"
        )

    def allreduce_(self, tensor: Any) -> None:
        hvd = self._hvd
        if not self.poll_nap_s:
            hvd.allreduce_(tensor, op=hvd.Sum)
            return
        handle = hvd.allreduce_async_(tensor, op=hvd.Sum)
        while not hvd.poll(handle):
            time.sleep(self.poll_nap_s)
        hvd.synchronize(handle)

    def allgather_floats(self, values: list[float]) -> list[list[float]]:
        import torch

        self._count += 1
        mine = torch.tensor([values], dtype=torch.float64)
        out = self._hvd.allgather(mine, name=f"rackcert.gather.{self._count}")
        return out.tolist()

    def allgather_object(self, obj: Any) -> list[Any]:
        return list(self._hvd.allgather_object(obj))

    def barrier(self) -> None:
        self._hvd.barrier() if hasattr(self._hvd, "barrier") else self.allgather_floats([0.0])

    def wrap(self, model: Any, optimizer: Any) -> tuple[Any, Any]:
        """hvd.DistributedOptimizer across ranks; nothing at world size 1 (as for DDP)."""
        if self.world_size == 1:
            self.data_parallel = "none (1 rank)"
            return model, optimizer
        hvd = self._hvd
        self.data_parallel = "horovod"
        self.wraps_optimizer = True
        if self.same_start(model, optimizer):
            self.start_sync = START_CHECKED
        else:
            self.start_sync = START_BROADCAST
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        dist_opt = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        return model, dist_opt

    def step(self, optimizer: Any, scaler: Any | None) -> None:
        if scaler is None or not self.wraps_optimizer:
            super().step(optimizer, scaler)
            return
        # Horovod's AMP recipe: finish the gradient allreduce, then let the scaler step.
        optimizer.synchronize()
        with optimizer.skip_synchronize():
            scaler.step(optimizer)
        scaler.update()

    def close(self) -> None:
        self._hvd.shutdown()


def connect(backend: str, device: str = "auto") -> Comm:
    """The engine the launcher started us under: 'torch' (torchrun) or 'horovod'."""
    if backend == "horovod":
        return HorovodComm(device)
    if backend == "torch":
        return TorchComm(device)
    raise ValueError(f"unknown worker backend {backend!r} (torch or horovod)")
