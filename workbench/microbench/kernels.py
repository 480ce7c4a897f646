"""Single-device microbenchmarks: GEMM, attention (scaled_dot_product_attention), memory
copy / triad, kernel launch latency. Each returns schema records (schema.record).

`torch` is passed in (imported once by `run`), so this module imports without it.
"""
from __future__ import annotations

from .schema import record
from .timing import measure

TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16",
                "fp8": "float8_e4m3fn"}


def _dtype(torch, name: str):
    return getattr(torch, TORCH_DTYPES[name])


def fp8_supported(torch, device: str) -> bool:
    """FP8 GEMMs (torch._scaled_mm) need a CUDA device of compute capability 8.9 or newer."""
    if not device.startswith("cuda") or not hasattr(torch, "float8_e4m3fn"):
        return False
    return tuple(torch.cuda.get_device_capability(device)) >= (8, 9)


def _gemm_fn(torch, device, dtype, m, n, k):
    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.tensor(1.0, device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dt = _dtype(torch, dtype)
    a = torch.randn(m, k, device=device, dtype=dt)
    b = torch.randn(k, n, device=device, dtype=dt)
    out = torch.empty(m, n, device=device, dtype=dt)
    return lambda: torch.matmul(a, b, out=out)


def gemm(torch, *, device, hardware, source, shapes, dtypes, reps, warmup) -> list[dict]:
    """C[m,n] = A[m,k] @ B[k,n] for each shape and dtype; FLOPs 2mnk."""
    rows = []
    tf32 = device.startswith("cuda") and torch.backends.cuda.matmul.allow_tf32
    for dtype in dtypes:
        if device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        for m, n, k in shapes:
            fn = _gemm_fn(torch, device, dtype, m, n, k)
            stats = measure(torch, fn, device=device, warmup=warmup, reps=reps)
            rows.append(record(kind="gemm", hardware=hardware, dtype=dtype, m=m, n=n, k=k, devices=1,
                               metric="flops_per_s", value_si=2.0 * m * n * k / stats["time_s"],
                               source=source, **stats))
            del fn
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return rows


def attention(torch, *, device, hardware, source, seq_lens, dtype, batch, n_heads, head_dim, causal,
              reps, warmup) -> list[dict]:
    """Forward scaled_dot_product_attention; FLOPs 4·batch·seq²·heads·head_dim, halved when
    causal (the FlashAttention papers' count, as predict.attention uses)."""
    F = torch.nn.functional
    dt = _dtype(torch, dtype)
    rows = []
    for s in seq_lens:
        q, k, v = (torch.randn(batch, n_heads, s, head_dim, device=device, dtype=dt) for _ in range(3))
        stats = measure(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                        device=device, warmup=warmup, reps=reps)
        flops = 4.0 * batch * s * s * n_heads * head_dim * (0.5 if causal else 1.0)
        rows.append(record(kind="attention", hardware=hardware, dtype=dtype, batch=batch, seq_len=s,
                           n_heads=n_heads, head_dim=head_dim, causal=float(causal), devices=1,
                           metric="flops_per_s", value_si=flops / stats["time_s"], source=source, **stats))
    return rows


def memory(torch, *, device, hardware, source, sizes_bytes, reps, warmup) -> list[dict]:
    """Copy (b = a: reads and writes N bytes) and triad (a = b + s·c: 3N bytes) on fp32
    arrays of N bytes each; size_bytes is the total moved, as memory_time counts it."""
    rows = []
    for nbytes in sizes_bytes:
        n = max(int(nbytes) // 4, 1)
        a, b, c = (torch.rand(n, device=device) for _ in range(3))
        for op, moved, fn in (("copy", 2, lambda: b.copy_(a)),
                              ("triad", 3, lambda: torch.add(b, c, alpha=3.0, out=a))):
            stats = measure(torch, fn, device=device, warmup=warmup, reps=reps)
            size = moved * 4.0 * n
            rows.append(record(kind="memory", op=op, hardware=hardware, dtype="fp32", size_bytes=size,
                               devices=1, metric="bytes_per_s", value_si=size / stats["time_s"],
                               source=source, **stats))
        del a, b, c
    return rows


def launch(torch, *, device, hardware, source, reps, warmup, inner: int = 200) -> list[dict]:
    """Time per tiny kernel (an in-place add on one element) launched back to back: `eager`
    through the framework, and on CUDA `graph`, replayed from a CUDA graph (the spec's
    kernel_launch_s is the gap under CUDA graphs)."""
    from .timing import summary, time_fn
    x = torch.zeros(1, device=device)

    def eager():
        for _ in range(inner):
            x.add_(1.0)

    stats = summary(time_fn(torch, eager, device=device, warmup=warmup, reps=reps))
    rows = [_launch_row(hardware, source, "eager", stats, inner)]
    if device.startswith("cuda"):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            eager()  # warm up on a side stream before capture, as the CUDA-graph docs ask
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            eager()
        stats = summary(time_fn(torch, graph.replay, device=device, warmup=warmup, reps=reps))
        rows.append(_launch_row(hardware, source, "graph", stats, inner))
    return rows


def _launch_row(hardware, source, op, stats, inner):
    per = {k: (v / inner if k.startswith("time") else v) for k, v in stats.items()}
    return record(kind="launch", op=op, hardware=hardware, dtype="fp32", devices=1, metric="time_s",
                  value_si=per["time_s"], source=source, **per)
