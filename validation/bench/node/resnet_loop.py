"""ResNet50 synthetic training throughput, and the weak-scaling arithmetic over it.

As tf_cnn_benchmarks and Horovod's pytorch_synthetic_benchmark do: random images and
labels resident on the device (no input pipeline in the measurement), a fixed batch per
GPU (weak scaling), warm-up steps excluded (cudnn autotuning, torch.compile), then a few
seconds of untimed steps (the board settles at its power limit), then ten timed
intervals; per interval each rank's images/s, summed over ranks for the total; the figure
is the median interval. The spread is 1.96 sigma of the total over the intervals, as
Horovod prints it.

Fast by default on GPUs (what a tuned run does, and what certification should measure):
bf16 autocast (no gradient scaler: bf16 has fp32's exponent range), channels-last,
cudnn.benchmark, torch.compile (inductor's default mode: CUDA graphs measured slower), the
optimizer step compiled too, no data-parallel wrapper when there is one rank (nothing to
average). Each of these
was measured on an H200 (docs/bench-h200.md); GPUs without bf16 fall back to fp16 with
a gradient scaler. The `naive`
configuration (eager fp32, NCHW) is kept to show what the defaults are worth, and two
reference loops measured in the same run say where the default stands: `plain` (the
short loop a tuned user writes: torch.compile, fp16 autocast, channels-last, plain SGD,
no wrapper) and `horovod` (Horovod's pytorch_synthetic_benchmark defaults: eager fp32,
batch 32, SGD without momentum, cudnn.benchmark on).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class TrainConfig:
    model: str = "resnet50"
    batch: int = 256
    image_size: int = 224
    precision: str = "bf16"  # fp16 | bf16 | fp32
    channels_last: bool = True
    cudnn_benchmark: bool = True
    compile: bool = True
    warmup_steps: int = 20
    # After the warm-up steps (compilation, cudnn autotuning), steps go on untimed for this
    # long: the first steps after a compile run on a cool board at its top clock, and a
    # board at its power limit settles lower within seconds; timing from the first
    # compiled step measured how long compilation left the GPU idle, not the GPU.
    settle_s: float = 5.0
    # Ten windows, the figure their median: one stalled window (a neighbour's CPU burst, a
    # late autotune) moves a mean of five by a fifth of its loss, a median of ten not.
    intervals: int = 10
    # 20 steps (about 0.7 s at batch 256 on an H200) per interval: 10 gave a spread of 1-3%
    # between intervals, too coarse to tell two processes 2% apart.
    steps_per_interval: int = 20
    fused_optimizer: bool = True
    momentum: float = 0.9
    # torch.compile mode: "auto" = inductor's default mode at every scale. CUDA graphs
    # (reduce-overhead) are within a few percent of it either way on an H200 at one rank
    # (-4.6%, +0.8% and +1% on three machines, docs/bench-h200.md), and across ranks DDP
    # splits the graph at its buckets: one mode keeps the 1-GPU baseline the same code path
    # as the points it is compared with.
    compile_mode: str | None = "auto"
    compile_optimizer: bool = True  # the optimizer step compiled too (without a scaler)

    @classmethod
    def for_device(cls, device_type: str, quick: bool = False) -> TrainConfig:
        """rackcert's defaults: tuned on GPUs; small and fp32 on CPUs (a path check only)."""
        if device_type == "cuda":
            cfg = cls()
            quick_gpu = replace(
                cfg, warmup_steps=5, settle_s=0.0, intervals=3, steps_per_interval=5
            )
            return quick_gpu if quick else cfg
        base = cls(
            batch=8,
            image_size=64,
            precision="fp32",
            channels_last=False,
            cudnn_benchmark=False,
            compile=False,
            warmup_steps=1,
            settle_s=0.0,
            intervals=3,
            steps_per_interval=2,
        )
        # One warm-up step: eager CPU steps have no autotuning or compilation to wait out, and
        # the first step's one-time costs (allocations, Horovod's first negotiation of each
        # gradient) do not reach the second: in the lab's demo a warm-up step took what a timed
        # one did (0.74 vs 0.64-0.88 s at one node, 13.1 vs 13.3 s across two, where each step
        # allreduces ResNet50's 100 MB of gradients over the lab's 100 Mbit/s links).
        # One timed step: the path check proves the loop runs and its gradients cross the
        # nodes; a second step added only a spread of two samples, which says nothing, and
        # on the lab's 100 Mbit/s links each step across two nodes costs ~13 s (ResNet50's
        # ~100 MB of gradients), 8% of the demo's bench.
        quick_cpu = replace(
            base, batch=4, image_size=32, warmup_steps=1, intervals=1, steps_per_interval=1
        )
        return quick_cpu if quick else base

    def naive(self) -> TrainConfig:
        """The loop people write first: eager fp32, NCHW, no cudnn autotuning."""
        return replace(
            self,
            precision="fp32",
            channels_last=False,
            cudnn_benchmark=False,
            compile=False,
            fused_optimizer=False,
        )

    def plain(self) -> TrainConfig:
        """Reference: the loop a tuned user writes (compiled, fp16 + GradScaler, channels-last,
        torch.optim.SGD with its default implementation, no wrapper at one rank)."""
        return replace(
            self,
            precision="fp16",
            channels_last=True,
            cudnn_benchmark=True,
            compile=True,
            compile_mode=None,
            compile_optimizer=False,
            fused_optimizer=False,
            momentum=0.9,
        )

    def horovod_defaults(self) -> TrainConfig:
        """Reference: Horovod's pytorch_synthetic_benchmark as shipped (eager fp32, NCHW,
        batch 32, `optim.SGD(lr=0.01)` without momentum, `cudnn.benchmark = True`)."""
        return replace(
            self,
            batch=32,
            precision="fp32",
            channels_last=False,
            cudnn_benchmark=True,
            compile=False,
            compile_mode=None,
            compile_optimizer=False,
            fused_optimizer=False,
            momentum=0.0,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _build(cfg: TrainConfig, comm: Any) -> tuple[Any, Any, Any, Any, Any]:
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    torch.manual_seed(1234)
    model = getattr(torchvision.models, cfg.model)(weights=None).to(comm.device)
    fmt = torch.channels_last if cfg.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    cuda = comm.device.type == "cuda"
    # Fused SGD on GPUs: GradScaler hands it the scale and the inf flag as tensors, so a step
    # never waits for the GPU (with an unfused optimizer GradScaler reads found_inf with
    # .item() every step, which drains the kernel launch queue).
    fused = cuda and cfg.fused_optimizer and not optimizer_compiled(cfg, comm)
    opt_kw = {"fused": True} if fused else {}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=cfg.momentum, **opt_kw)
    # Zero momentum buffers for every implementation: the same first step as SGD's own
    # (buf = grad), and one optimizer graph from the first step when it is compiled.
    seed_momentum(optimizer)
    model, optimizer = comm.wrap(model, optimizer)
    gen = torch.Generator(device=comm.device).manual_seed(1000 + comm.rank)
    shape = (cfg.batch, 3, cfg.image_size, cfg.image_size)
    data = torch.randn(shape, device=comm.device, generator=gen).contiguous(memory_format=fmt)
    target = torch.randint(0, 1000, (cfg.batch,), device=comm.device, generator=gen)
    scaler = torch.amp.GradScaler("cuda") if (cuda and cfg.precision == "fp16") else None
    return model, optimizer, scaler, data, target


def seed_momentum(optimizer: Any) -> None:
    """Give every parameter a zero momentum buffer before the first step.

    Why: fused SGD makes its first-step buffers with `torch.empty_like` and lets the fused
    kernel fill them; when GradScaler finds inf gradients on that step (it usually does:
    the scale starts at 65536) the kernel skips everything, the buffers stay uninitialised
    and the next step turns the weights into NaN (seen on an H200, torch 2.11). A zero
    buffer gives exactly the unfused first step (buf = grad, dampening 0).
    """
    import torch

    for group in optimizer.param_groups:
        if not group.get("momentum"):
            continue
        for p in group["params"]:
            optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)


def optimizer_compiled(cfg: TrainConfig, comm: Any) -> bool:
    """Whether the optimizer step is compiled: asked for, the model compiled, no gradient
    scaler (its step is Python around the optimizer's) and no Horovod optimizer wrapper
    (its step waits for the gradient allreduce first)."""
    horovod_wrapped = comm.backend == "horovod" and comm.world_size > 1
    return cfg.compile and cfg.compile_optimizer and cfg.precision != "fp16" and not horovod_wrapped


def _compile_optimizer_step(optimizer: Any) -> None:
    """Compile the optimizer's step (PyTorch's "compiling the optimizer" recipe): its
    per-parameter updates become a few generated kernels. An instance attribute, so the
    eager method is one `pop` away if compilation fails."""
    import torch

    eager_step = optimizer.step

    @torch.compile(fullgraph=False)
    def compiled_step() -> None:
        eager_step()

    optimizer.step = compiled_step


def _amp(cfg: TrainConfig, device_type: str) -> Any:
    import torch

    if cfg.precision == "fp32":
        return torch.autocast(device_type, enabled=False)
    dtype = torch.float16 if cfg.precision == "fp16" else torch.bfloat16
    return torch.autocast(device_type, dtype=dtype)


def train(comm: Any, cfg: TrainConfig) -> dict[str, Any]:
    """Run warm-up then the timed intervals; the same dict on every rank.

    torch.compile is tried when asked; if it fails the run goes on eagerly and the
    result says so (`compiled: false`, `compile_error`), rather than certifying nothing.
    """
    import torch
    import torch.nn.functional as F

    if (
        cfg.precision == "bf16"
        and comm.device.type == "cuda"
        and not torch.cuda.is_bf16_supported()
    ):
        cfg = replace(cfg, precision="fp16")  # pre-Ampere: fp16 with a gradient scaler
    mode = None if cfg.compile_mode == "auto" else cfg.compile_mode
    before = device_state(comm.device)
    model, optimizer, scaler, data, target = _build(cfg, comm)
    eager = model
    compile_error = None
    graphs = cfg.compile and mode in ("reduce-overhead", "max-autotune")
    if cfg.compile:
        model = torch.compile(model, mode=mode)
        if optimizer_compiled(cfg, comm):
            _compile_optimizer_step(optimizer)

    def step() -> Any:
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        model.zero_grad(set_to_none=True)  # Horovod's optimizer takes no set_to_none
        with _amp(cfg, comm.device.type):
            loss = F.cross_entropy(model(data), target)
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        comm.step(optimizer, scaler)
        return loss

    start = time.perf_counter()
    try:
        for _ in range(max(1, cfg.warmup_steps)):
            step()
        comm.synchronize()
    except Exception as exc:  # noqa: BLE001 - compile failures are many kinds of error
        if not cfg.compile:
            raise
        compile_error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        model = eager
        graphs = False
        optimizer.__dict__.pop("step", None)  # back to the eager optimizer step too
        for _ in range(max(1, cfg.warmup_steps)):
            step()
        comm.synchronize()
    warmup_s = time.perf_counter() - start
    caches = compile_cache_counters() if cfg.compile else None
    settle_steps, settle_s = settle(step, comm, cfg.settle_s)
    comm.barrier()
    rates: list[float] = []
    under_load: list[dict[str, Any]] = []
    loss = None
    half = cfg.steps_per_interval // 2
    for _ in range(cfg.intervals):
        t0 = time.perf_counter()
        for i in range(cfg.steps_per_interval):
            loss = step()
            if i == half:  # the queue is full here: clock and power of the board at work
                under_load.append(load_sample(comm.device))
        comm.synchronize()
        rates.append(cfg.batch * cfg.steps_per_interval / (time.perf_counter() - t0))
    final_loss = float(loss.detach().float().item()) if loss is not None else float("nan")
    rows = comm.allgather_floats([*rates, final_loss])
    per_rank = [r[: cfg.intervals] for r in rows]
    totals = [sum(r[i] for r in per_rank) for i in range(cfg.intervals)]
    return {
        "config": {
            **cfg.to_dict(),
            "compiled": cfg.compile and compile_error is None,
            "compile_mode_used": (mode or "default") if cfg.compile else None,
            "cuda_graphs": graphs,
            "optimizer_compiled": optimizer_compiled(cfg, comm) and compile_error is None,
            "data_parallel": comm.data_parallel,
            "start_sync": comm.start_sync,
            "gradient_scaler": scaler is not None,
        },
        "compile_error": compile_error,
        "world_size": comm.world_size,
        "warmup_s": warmup_s,
        "compile_cache": caches,
        "settle_steps": settle_steps,
        "settle_s": settle_s,
        "interval_totals": totals,
        "per_rank_mean": [statistics.fmean(r) for r in per_rank],
        # The median of the windows (one stalled window does not move it); the mean beside.
        "images_per_sec": statistics.median(totals),
        "images_per_sec_mean": statistics.fmean(totals),
        "images_per_sec_per_gpu": statistics.median(totals) / comm.world_size,
        "spread": spread(totals),
        "under_load": summarize_load(under_load),
        "loss_finite": all(math.isfinite(r[-1]) for r in rows),
        # This rank's device as the loop found it and as the timed steps left it: memory
        # another loop left reserved, clocks, temperature, power (what a sag is made of).
        "device_before": before,
        "device_after": device_state(comm.device),
    }


def settle(step: Any, comm: Any, seconds: float) -> tuple[int, float]:
    """Untimed steps for about `seconds` after the warm-up (TrainConfig.settle_s): every
    rank runs the same number (rank 0's, agreed through a gather), so none waits in a
    collective the others never start. Returns (steps, seconds taken)."""
    if seconds <= 0:
        return 0, 0.0
    start = time.perf_counter()
    steps = 0
    while True:
        for _ in range(5):
            step()
        steps += 5
        comm.synchronize()
        elapsed = time.perf_counter() - start
        go_on = comm.allgather_floats([1.0 if elapsed < seconds else 0.0])[0][0] > 0
        if not go_on:
            return steps, elapsed


def compile_cache_counters() -> dict[str, int]:
    """How inductor's FX graph cache and the AOTAutograd cache answered this process's
    compilations (hits, misses, bypasses): a warm-up of a minute with a "warm" cache is a
    cache that missed, and this says which."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # an older torch: the figure is left out
        return {}
    keys = {
        "fxgraph_hit": ("inductor", "fxgraph_cache_hit"),
        "fxgraph_miss": ("inductor", "fxgraph_cache_miss"),
        "fxgraph_bypass": ("inductor", "fxgraph_cache_bypass"),
        "aot_autograd_hit": ("aot_autograd", "autograd_cache_hit"),
        "aot_autograd_miss": ("aot_autograd", "autograd_cache_miss"),
        "aot_autograd_bypass": ("aot_autograd", "autograd_cache_bypass"),
    }
    return {name: int(counters[group][key]) for name, (group, key) in keys.items()}


def load_sample(device: Any) -> dict[str, Any]:
    """SM clock and board power read while the GPU works (mid-window, the launch queue
    full): a reading after a synchronize catches an idle board at its boost clock."""
    state = device_state(device)
    return {k: state.get(k) for k in ("sm_clock_mhz", "power_w", "temperature_c")}


def summarize_load(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Lowest, median and highest of each reading over the timed windows ({} on CPUs)."""
    out: dict[str, Any] = {}
    for key in ("sm_clock_mhz", "power_w", "temperature_c"):
        values = [s[key] for s in samples if s.get(key) is not None]
        if values:
            out[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    return out


def device_state(device: Any) -> dict[str, Any]:
    """Memory the caching allocator holds, and (through NVML, when it is there) the SM
    clock, temperature and power of a CUDA device; {} on CPUs."""
    import torch

    if device is None or device.type != "cuda":
        return {}
    out: dict[str, Any] = {
        "memory_reserved_gib": torch.cuda.memory_reserved(device) / 2**30,
        "memory_allocated_gib": torch.cuda.memory_allocated(device) / 2**30,
    }
    for key, probe in (
        ("sm_clock_mhz", torch.cuda.clock_rate),
        ("temperature_c", torch.cuda.temperature),
        ("power_w", lambda d: torch.cuda.power_draw(d) / 1000.0),
    ):
        try:
            out[key] = probe(device)
        except Exception:  # noqa: BLE001 - no NVML bindings: the figure is left out
            out[key] = None
    return out


def spread(values: list[float]) -> float:
    """1.96 sigma of the values (Horovod's synthetic benchmark's "+-")."""
    return 1.96 * statistics.stdev(values) if len(values) > 1 else 0.0
