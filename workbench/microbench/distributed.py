"""All-reduce and all-gather through torch.distributed, one process per device (NCCL on
CUDA, gloo on CPU), timed like nccl-tests: `size` is the per-rank buffer of all-reduce and
the gathered output of all-gather, algbw = size / time with time the slowest rank's, and
busbw = algbw · 2(p-1)/p (all-reduce) or (p-1)/p (all-gather) (nccl-tests PERFORMANCE.md).
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import numpy as np

from .schema import record
from .timing import summary

OPS = ("all_reduce", "all_gather")
BUSBW_FACTOR = {"all_reduce": lambda p: 2.0 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p}


def collectives(torch, *, device, hardware, source, sizes_bytes, ops=OPS, world_size=2, reps=10, warmup=3,
                timeout_s: float = 600.0) -> list[dict]:
    """Spawn `world_size` ranks on `device` ("cuda": one GPU each; "cpu": gloo) and time
    each op and size; [] with fewer than two ranks."""
    if world_size < 2:
        return []
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory(prefix="workbench-dist-") as tmp:
        init, out = os.path.join(tmp, "init"), os.path.join(tmp, "times.json")
        kind = "cuda" if device.startswith("cuda") else "cpu"
        ctx = mp.start_processes(_worker, args=(world_size, init, kind, list(sizes_bytes), list(ops), reps,
                                                warmup, out),
                                 nprocs=world_size, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.terminate()
                raise TimeoutError(f"collective microbenchmark on {world_size} ranks ran over {timeout_s:.0f} s")
        with open(out) as f:
            timings = json.load(f)
    rows = []
    for t in timings:
        stats = summary(t["times_s"])
        p, size = float(world_size), float(t["size_bytes"])
        rows.append(record(kind=t["op"], op=t["op"], hardware=hardware, dtype="fp32", size_bytes=size, devices=p,
                           metric="bus_bandwidth_bytes_per_s",
                           value_si=size / stats["time_s"] * BUSBW_FACTOR[t["op"]](p), source=source, **stats))
    return rows


def _worker(rank, world_size, init, kind, sizes, ops, reps, warmup, out):  # runs in a spawned process
    import torch
    import torch.distributed as dist
    if kind == "cuda":
        torch.cuda.set_device(rank)
    dev = f"cuda:{rank}" if kind == "cuda" else "cpu"
    dist.init_process_group("nccl" if kind == "cuda" else "gloo", init_method=f"file://{init}", rank=rank,
                            world_size=world_size)
    results = []
    try:
        for op in ops:
            for size in sizes:
                n = max(int(size) // 4 // world_size, 1) * world_size  # fp32 elements, divisible by p
                fn = _op(torch, dist, op, n, world_size, dev)
                for _ in range(warmup):
                    fn()
                times = np.empty(reps)
                for i in range(reps):
                    dist.barrier()
                    if kind == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    fn()
                    if kind == "cuda":
                        torch.cuda.synchronize()
                    times[i] = time.perf_counter() - t0
                slowest = torch.tensor(times, dtype=torch.float64, device=dev)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                results.append({"op": op, "size_bytes": 4.0 * n, "times_s": slowest.cpu().tolist()})
        if rank == 0:
            with open(out, "w") as f:
                json.dump(results, f)
    finally:
        dist.destroy_process_group()


def _op(torch, dist, op, n, p, dev):
    if op == "all_reduce":
        buf = torch.ones(n, device=dev)
        return lambda: dist.all_reduce(buf)
    inp = torch.ones(n // p, device=dev)
    if dev.startswith("cuda"):
        out = torch.empty(n, device=dev)
        return lambda: dist.all_gather_into_tensor(out, inp)
    parts = [torch.empty(n // p, device=dev) for _ in range(p)]
    return lambda: dist.all_gather(parts, inp)
