"""Microbenchmarks with PyTorch: GEMM over shapes and dtypes, attention over sequence
lengths, memory copy / triad over sizes, kernel launch latency and, with several devices,
all-reduce / all-gather through torch.distributed. The result is an xr.Dataset in the
measurement schema (schema.py) with the device, driver, library versions and clocks in its
attrs, which calibrate/ reads next to the published rows.

    from workbench import microbench
    ds = microbench.run(device="cuda", quick=False)
    microbench.save(ds, "h100_sxm.nc")

or `python -m workbench.microbench --device cuda --out h100_sxm.nc`. torch is optional
(`pip install 'workbench[microbench]'`); the schema, save and load work without it.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import subprocess

import xarray as xr

from .schema import COLUMNS, KINDS, SchemaError, load, record, save, to_dataset, to_frame, validate

__all__ = ["COLUMNS", "KINDS", "SUITES", "SchemaError", "load", "plan", "record", "require_torch", "run", "save",
           "spec_name", "to_dataset", "to_frame", "validate"]

SUITES = ("gemm", "attention", "memory", "launch", "collectives")

# Device names as torch reports them -> hardware spec names (workbench/specs/hardware), first
# match wins: "GH200" before "H200", which it contains ("NVIDIA GH200 480GB").
SPEC_NAMES = (("H100 80GB HBM3", "h100_sxm"), ("H100 SXM", "h100_sxm"), ("GH200", "gh200"), ("H200", "h200_sxm"),
              ("A100-SXM", "a100_sxm"), ("B200", "b200"), ("MI300X", "mi300x"), ("MI325X", "mi325x"),
              ("MI355X", "mi355x"), ("GAUDI2", "gaudi2"), ("GAUDI3", "gaudi3"))

_SQUARES_FULL = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
# Shapes of LLM layers: tokens x (d_model -> fused QKV / FFN) of Llama 3 8B and 70B at TP 1 and 8.
_LLM_SHAPES = [(t, n, k) for t in (1, 16, 128, 2048, 8192) for n, k in ((6144, 4096), (14336, 4096), (4096, 14336),
                                                                        (1280, 8192), (3584, 8192), (8192, 3584))]
PLANS = {
    ("cpu", True): dict(gemm_shapes=[(s, s, s) for s in (64, 128, 256)], gemm_dtypes=["fp32", "bf16"],
                        attn_seq_lens=[64, 128, 256], attn=dict(dtype="fp32", batch=1, n_heads=4, head_dim=32),
                        memory_bytes=[2**16, 2**20, 2**23], coll_bytes=[2**12, 2**16, 2**20], reps=5, warmup=2),
    ("cpu", False): dict(gemm_shapes=[(s, s, s) for s in (64, 128, 256, 512, 1024)], gemm_dtypes=["fp32", "bf16"],
                         attn_seq_lens=[128, 256, 512, 1024], attn=dict(dtype="fp32", batch=1, n_heads=8, head_dim=64),
                         memory_bytes=[2**k for k in range(14, 28, 2)], coll_bytes=[2**k for k in range(12, 25, 2)],
                         reps=10, warmup=3),
    ("cuda", True): dict(gemm_shapes=[(s, s, s) for s in (1024, 2048, 4096, 8192)], gemm_dtypes=["bf16", "fp8"],
                         attn_seq_lens=[1024, 4096, 16384], attn=dict(dtype="bf16", batch=1, n_heads=32, head_dim=128),
                         memory_bytes=[2**k for k in range(20, 31, 2)], coll_bytes=[2**k for k in range(20, 31, 2)],
                         reps=20, warmup=5),
    ("cuda", False): dict(gemm_shapes=[(s, s, s) for s in _SQUARES_FULL] + _LLM_SHAPES,
                          gemm_dtypes=["bf16", "fp16", "fp8", "tf32"],
                          attn_seq_lens=[512, 1024, 2048, 4096, 8192, 16384, 32768],
                          attn=dict(dtype="bf16", batch=1, n_heads=32, head_dim=128),
                          memory_bytes=[2**k for k in range(14, 32)], coll_bytes=[2**k for k in range(16, 34)],
                          reps=50, warmup=10),
}


def require_torch():
    """PyTorch, or an ImportError that says how to install it."""
    try:
        import torch
    except ImportError:
        raise ImportError("workbench.microbench needs PyTorch, which is not installed: "
                          "pip install 'workbench[microbench]' (CPU build: pip install torch)") from None
    return torch


def spec_name(device_name: str) -> str:
    """The hardware spec for a device name ("NVIDIA H100 80GB HBM3" -> "h100_sxm"); the
    device name itself, lower-cased, when no spec matches."""
    for text, name in SPEC_NAMES:
        if text.lower() in device_name.lower():
            return name
    return device_name.strip().lower().replace(" ", "_") or "unknown"


def plan(device: str = "cpu", quick: bool = True) -> dict:
    """Shapes, sizes and repetitions for a device class and mode."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in
            PLANS[("cuda" if device.startswith("cuda") else "cpu", bool(quick))].items()}


def run(device: str = "cpu", quick: bool = True, *, hardware: str | None = None, suites=SUITES,
        world_size: int | None = None, overrides: dict | None = None) -> xr.Dataset:
    """Run the microbenchmarks on `device` ("cpu", "cuda", "cuda:1") and return the
    measurements. quick=True uses small sizes (seconds on a CPU); `overrides` replaces
    entries of the plan (see `plan`); `world_size` ranks run the collectives (default:
    every visible GPU on CUDA, 1 on CPU, and with one rank they are skipped)."""
    torch = require_torch()
    from . import distributed, kernels
    bad = [s for s in suites if s not in SUITES]
    if bad:
        raise ValueError(f"suite={bad[0]!r} is not known; allowed: {', '.join(SUITES)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} is not available: torch {torch.__version__} sees no CUDA device; "
                           "allowed here: cpu")
    if device.startswith("cuda") and torch.device(device).index is not None:
        torch.cuda.set_device(torch.device(device).index)  # "cuda" alone: the current device
    p = {**plan(device, quick), **(overrides or {})}
    env = environment(torch, device)
    hw = hardware or (spec_name(env["device_name"]) if device.startswith("cuda") else "cpu")
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    source = f"workbench.microbench on {env['device_name']} ({created})"
    common = dict(device=device, hardware=hw, source=source, reps=p["reps"], warmup=p["warmup"])
    rows, skipped = [], []
    torch.manual_seed(0)
    if "gemm" in suites:
        dtypes = [d for d in p["gemm_dtypes"] if d != "fp8" or kernels.fp8_supported(torch, device)]
        skipped += [f"gemm {d}: not supported on {device}" for d in p["gemm_dtypes"] if d not in dtypes]
        rows += kernels.gemm(torch, shapes=p["gemm_shapes"], dtypes=dtypes, **common)
    if "attention" in suites:
        rows += kernels.attention(torch, seq_lens=p["attn_seq_lens"], causal=True, **p["attn"], **common)
    if "memory" in suites:
        rows += kernels.memory(torch, sizes_bytes=p["memory_bytes"], **common)
    if "launch" in suites:
        rows += kernels.launch(torch, **common)
    if "collectives" in suites:
        ranks = world_size
        if ranks is None:
            ranks = torch.cuda.device_count() if device.startswith("cuda") else 1
        if ranks < 2:
            skipped.append(f"collectives: {ranks} device(s), at least 2 needed")
        else:
            rows += distributed.collectives(torch, sizes_bytes=p["coll_bytes"], world_size=ranks, **common)
    attrs = {**env, "hardware": hw, "quick": int(bool(quick)), "created_utc": created, "suites": ",".join(suites),
             "skipped": "; ".join(skipped), "plan": json.dumps(p, default=str)}
    return to_dataset(rows, attrs)


def environment(torch, device: str) -> dict:
    """Device, driver, library versions and clocks, as netCDF-safe attributes."""
    import numpy
    from .. import __version__
    env = {"workbench_version": __version__, "python": platform.python_version(), "numpy": numpy.__version__,
           "torch": torch.__version__, "device": device, "torch_threads": torch.get_num_threads()}
    if device.startswith("cuda"):
        idx = torch.device(device).index
        idx = torch.cuda.current_device() if idx is None else idx
        prop = torch.cuda.get_device_properties(idx)
        env.update({"device_name": prop.name, "cuda": str(torch.version.cuda or torch.version.hip),
                    "cudnn": str(torch.backends.cudnn.version()), "compute_capability": f"{prop.major}.{prop.minor}",
                    "device_memory_bytes": float(prop.total_memory), "multiprocessors": prop.multi_processor_count,
                    "device_count": torch.cuda.device_count()})
        env.update(_nvidia_smi(idx))
    else:
        env.update({"device_name": _cpu_name(), "cpu_count": os.cpu_count() or 0})
    return env


def _nvidia_smi(idx: int) -> dict:
    """Driver version and clocks from nvidia-smi; {} where it is not available."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    fields = ["driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.limit"]
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", str(idx)],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    names = ["driver", "sm_clock_mhz", "memory_clock_mhz", "max_sm_clock_mhz", "max_memory_clock_mhz", "power_limit_w"]
    return {n: v.strip() for n, v in zip(names, out.split(","))}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"
