"""Inference on Cerebras systems: the model laid out layer by layer on P x P PE regions of
one or more wafers (weights resident in SRAM), prefill then static-batch decode.

Placement: each transformer layer owns a region of P x P PEs, and the lm_head (with the
input embedding) as many regions as its weights need, the vocabulary split over them,
running on more where the layers leave regions spare (lm_head_regions, placement); a MoE
layer that its region cannot hold whole keeps its routed experts in regions of the same
side beside it (wafer_layers.layer_memory_per_pe: expert_groups,
laid out after their layer, so the activations still cross devices - 1 system boundaries
per token); the regions tile the program rectangle of each wafer, and a model larger than
one wafer is pipelined across `devices` systems (activations cross the system I/O). The
layer regions are stages of a pipeline (a split layer one stage: its region, then its
busiest expert region):
- prefill runs the prompt through them in chunks (wafer_pipeline.py);
- decode keeps up to one micro-batch per layer in flight (decode_step): a token's step
  crosses every layer in turn, while the other micro-batches occupy the other layers, so
  up to n_layers sequences decode at the batch-1 time per token, and beyond that each
  micro-batch carries ceil(batch / n_layers) rows;
- speculative decoding's verify step checks its k+1 positions as a wavefront through the
  regions (decode_step), so at a small batch it costs little more than one token.
Prefill and decode may use different grids (WaferLLM re-lays the weights out between
phases; that cost is not modelled). Without `pe_grid`, the decode grid is the fastest side
that fits, searched over every integer side (the whole step, layers and lm_head); where
none fits, the side closest to fitting (placement's `overflow`), with the reason that
stops it there (_reason).

Memory: a layer region holds its weights, every sequence's KV cache (all prompt +
generate tokens) and the activation rows it computes at once: a decode micro-batch's, and
in prefill a chunk's (sequences x tokens, at most what the weights and cache leave:
placement's room_rows; `prefill_pe_memory_used_bytes`). A point whose layout does not fit
(fits=False from the placement) has no times: every output in seconds or per second is
NaN (no_times_where), its memory and grid outputs kept; `memory_capacity_bytes` is the
usable SRAM (usable_sram_bytes: less each PE's reserve), as in training.
"""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..primitives.mesh import memory_port_bound, mesh_gemv, tiles
from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from ..units import DTYPE_BYTES
from .wafer_layers import activation_bytes_per_row, decode_layer, layer_memory_per_pe
from .speculative import expected_tokens_per_step, per_token_s
from .wafer_pipeline import crossing_s, pipelined_prefill

GRID_CHUNK = 64  # candidate grid sides evaluated together (bounds the search's memory)


def grid_candidates(w: WaferNumbers):
    """Every integer grid side that fits in the program rectangle: tile padding makes the
    cost jump between neighbouring sides, so a coarser ladder misses the fastest."""
    return np.arange(1, np.max(w.max_square_grid) + 1, dtype=float)


def regions(w: WaferNumbers, P):
    """Layer regions of P² PEs in one wafer's program rectangle. Regions need not be
    square (a P x P grid may be laid out as any rectangle of the same area), so the
    count is by area; the tiling loss of real layouts is not modelled."""
    return np.floor(w.program_pes / (P * P))


def lm_head_regions(model: ModelSpec, *, P, free_per_pe, w_bytes):
    """The fewest regions of side P that hold the lm_head, the input embedding beside it
    (unless tied), the vocabulary split evenly over them in whole tiles: a PE holds
    tiles(d_model, P) x tiles(ceil(V / R), P) weights of each matrix, so with c column tiles
    a PE's `free_per_pe` holds, R = ceil(V / (c P)) regions; inf where not one column tile
    fits. (placement: the head runs on more where the layers leave spare regions.)"""
    per_column_tile = tiles(model.d_model, P) * w_bytes * (1 if model.tied_embeddings else 2)
    cols = np.floor(free_per_pe / per_column_tile)
    return np.where(cols >= 1, np.ceil(model.vocab_size / (np.maximum(cols, 1.0) * P)), np.inf)


def lm_head(w: WaferNumbers, model: ModelSpec, *, P, rows, head_regions, mapping="mesh") -> dict:
    """The lm_head GEMV on the regions placement gives it: each of the `head_regions` regions
    multiplies the rows by its ceil(V / R) columns of the vocabulary at the same time, so the
    stage lasts one region's MeshGEMV (the rows reach every head region as they reach a
    layer's; the few logits' maxima across regions are not counted)."""
    R = np.where(np.isfinite(head_regions), np.maximum(head_regions, 1.0), 1.0)
    return mesh_gemv(w, P=P, k=model.d_model, n=np.ceil(model.vocab_size / R), rows=rows, mapping=mapping)


def placement(w: WaferNumbers, model: ModelSpec, *, P, devices, batch, tokens, generated, w_bytes,
              kv_bytes, mapping, draft: ModelSpec | None = None) -> dict:
    """Per-PE memory of a layer region and whether all regions fit on `devices` wafers
    (with a speculative `draft` model's layers, its expert regions and lm_head in regions
    of the same side, its fullest PE checked as the target's). Also `room_rows`: the
    activation rows a PE of the fullest layer region (the target's or the draft's) has room
    for beside its weights and KV cache, what prefill may run at once (wafer_pipeline), and
    `overflow`: the largest of (fullest PE / SRAM, regions needed / regions the wafers hold,
    side / largest square side), 1 or less where the layout fits, the grid search's measure
    of how far a point is from fitting."""
    sram = w.sram_per_pe_bytes

    def region(m: ModelSpec):
        rows = micro_batch_rows(m, batch)
        mem = layer_memory_per_pe(w, m, P=P, batch=batch, tokens=tokens, generated=generated, w_bytes=w_bytes,
                                  kv_bytes=kv_bytes, mapping=mapping, rows_in_flight=rows)
        row = activation_bytes_per_row(m, P=P)
        fixed = mem["total_bytes"] - mem["activation_bytes"]  # weights, cache, reserve (either region kind)
        no_kv = np.maximum(mem["weights_bytes"] + mem["activation_bytes"] + w.sram_reserved_per_pe_bytes,
                           mem["expert_region_bytes"])
        free = w.usable_sram_per_pe_bytes - mem["activation_bytes"]
        head = lm_head_regions(m, P=P, free_per_pe=free, w_bytes=w_bytes)
        return mem, head, np.floor((sram - fixed) / row), no_kv <= sram

    mem, head, room, fits_weights = region(model)
    expert_regions = model.n_moe_layers * mem["expert_groups"]
    needed = model.n_layers + expert_regions + head
    pe_bytes = mem["total_bytes"]
    fits_pe = pe_bytes <= sram
    draft_groups, draft_head, fullest = 0.0, 1.0, pe_bytes
    if draft is not None:
        dmem, draft_head, droom, dweights = region(draft)
        draft_groups = dmem["expert_groups"]
        needed = needed + draft.n_layers + draft.n_moe_layers * draft_groups + draft_head
        fits_pe = fits_pe & (dmem["total_bytes"] <= sram)
        fits_weights, room = fits_weights & dweights, np.minimum(room, droom)
        fullest = np.maximum(fullest, dmem["total_bytes"])
    per_wafer = regions(w, P)
    fits_regions = (needed <= devices * per_wafer) & (P <= w.max_square_grid)
    # The lm_head spreads over regions the layers leave, up to as many as make each no
    # fuller than a layer region's weights (its stage then no busier than a layer's): what
    # it runs on (head_regions), at least the fewest that hold it.
    placed = np.isfinite(needed)
    spare = np.where(placed, devices * per_wafer - np.where(placed, needed, 0.0), 0.0)
    balanced = lm_head_regions(model, P=P, free_per_pe=np.maximum(mem["weights_bytes"], 1.0), w_bytes=w_bytes)
    runs_on = np.where(fits_regions, np.maximum(head, np.minimum(balanced, head + spare)), head)
    overflow = np.maximum(np.maximum(fullest / sram, needed / np.maximum(devices * per_wafer, 1e-300)),
                          P / w.max_square_grid)
    return {"pe_bytes": pe_bytes, "regions_needed": needed, "fits_pe": fits_pe, "fits_weights": fits_weights,
            "fits_regions": fits_regions, "fits": fits_pe & fits_regions, "expert_groups": mem["expert_groups"],
            "draft_expert_groups": draft_groups, "expert_regions": expert_regions,
            "expert_region_bytes": mem["expert_region_bytes"], "head_regions": runs_on, "head_regions_needed": head,
            "draft_head_regions": draft_head,
            "room_rows": room, "row_bytes": activation_bytes_per_row(model, P=P),
            "fixed_bytes": pe_bytes - mem["activation_bytes"], "overflow": overflow}


def _best_grid(cost, candidates, shape):
    """The fastest feasible grid side for every point of `shape`, and where none is
    feasible the side closest to fitting (the least `overflow`, placement's measure).
    `cost(P)` -> (cycles, feasible, overflow) for P along a trailing axis; the candidates go
    in chunks of GRID_CHUNK (a loop over chunks, not points), keeping running minima; ties
    go to the smaller side."""
    fastest = (np.full(shape, np.inf), np.full(shape, np.nan))  # (running least, its side)
    closest = (np.full(shape, np.inf), np.full(shape, candidates[-1]))

    def fold(running, values, cand):  # the running least over a chunk's sides (ties: the earlier, smaller)
        values = np.broadcast_to(values, shape + (len(cand),))
        low = np.min(values, axis=-1)
        return np.minimum(running[0], low), np.where(low < running[0], np.take(cand, np.argmin(values, axis=-1)),
                                                     running[1])
    for start in range(0, len(candidates), GRID_CHUNK):
        cand = candidates[start:start + GRID_CHUNK]
        cycles, feasible, over = cost(cand.reshape((1,) * len(shape) + (-1,)))
        fastest = fold(fastest, np.where(feasible, cycles, np.inf), cand)
        closest = fold(closest, np.nan_to_num(over, nan=np.inf), cand)
    return np.where(np.isnan(fastest[1]), closest[1], fastest[1])


def micro_batches(model: ModelSpec, batch):
    """Decode micro-batches in flight: one per layer region at most (decode_step)."""
    return np.maximum(np.minimum(batch, model.n_layers), 1.0)


def micro_batch_rows(model: ModelSpec, batch):
    """Sequences per decode micro-batch, so a region buffers the activations of these rows
    only, while every sequence's KV cache stays in every region."""
    return np.ceil(batch / micro_batches(model, batch))


def decode_step(w: WaferNumbers, model: ModelSpec, *, P, batch, context, devices, mapping="mesh",
                rows_per_sequence=1.0, expert_groups=0.0, head_regions=1.0) -> dict:
    """One decode step of `batch` sequences pipelined through the layer regions.

    The stages are the L layer regions, the lm_head (on its `head_regions` regions side by
    side, placement's count: lm_head) and the devices - 1 system crossings.
    The batch is split into m = min(batch, L) micro-batches of r = ceil(batch / m) sequences
    (x `rows_per_sequence` rows: k+1 when verifying k drafted tokens), one per layer at most;
    each circulates through every stage once per token. With stage times s_j(r), a token
    takes max(sum_j s_j, m max_j s_j): the traversal when the micro-batches fit in the
    pipeline, the busiest stage times m when they queue for it (tests/workloads/
    test_wafer_inference.py simulates the ring). The parts (compute, mesh reduction, I/O)
    are the traversal's, scaled to the step.

    The u = rows_per_sequence rows a verify step checks (positions of one sequence) run in
    whichever of two orders is faster: together, u times the rows in every stage; or as a
    wavefront, u units of the micro-batch's rows each trailing the one before by a stage
    (position j needs position j-1's keys and values of a layer only once j-1 has entered
    that layer), so u units cross the stages like u identical jobs through a flow shop:
    traversal + (u - 1) x busiest stage, or u m x busiest stage when the ring is full
    (test_wafer_inference.py simulates it). Weights stay in place, so the wavefront is how a
    layer-pipelined wafer checks k drafted tokens for little more than one."""
    u = np.asarray(rows_per_sequence, float)
    ring = dict(P=P, batch=batch, context=context, devices=devices, mapping=mapping, expert_groups=expert_groups,
                head_regions=head_regions)
    together = _ring_step(w, model, rows_per_unit=u, units=1.0, **ring)
    if not np.any(u > 1.0):
        return together
    wavefront = _ring_step(w, model, rows_per_unit=1.0, units=u, **ring)
    faster = wavefront["step_s"] < together["step_s"]
    return {k: np.where(faster, wavefront[k], together[k]) for k in together}


def _ring_step(w: WaferNumbers, model: ModelSpec, *, P, batch, context, devices, mapping, rows_per_unit,
               units, expert_groups=0.0, head_regions=1.0) -> dict:
    """decode_step with each micro-batch's sequences as `units` pipeline units of
    `rows_per_unit` rows per sequence: max(traversal + (units - 1) x busiest stage,
    micro-batches x units x busiest stage)."""
    clock, L = w.clock_hz, model.n_layers
    m = micro_batches(model, batch)
    rows = micro_batch_rows(model, batch) * rows_per_unit
    layer = decode_layer(w, model, P=P, batch=rows, context=context, mapping=mapping, expert_groups=expert_groups)
    head = lm_head(w, model, P=P, rows=rows, head_regions=head_regions, mapping=mapping)
    crossings = devices - 1.0
    x = crossing_s(w, rows=rows, d_model=model.d_model) * (crossings > 0)
    t_layer, t_head = layer["cycles"] / clock, head["cycles"] / clock
    traverse = L * t_layer + t_head + crossings * x
    busiest = np.maximum(np.maximum(t_layer, t_head), x)
    step = np.maximum(traverse + (units - 1.0) * busiest, m * units * busiest)
    scale = step / traverse
    return {"step_s": step, "micro_batches": m + 0.0 * step,
            "compute_s": (L * layer["compute_cycles"] + head["compute_cycles"]) / clock * scale,
            "comm_s": (L * layer["reduce_cycles"] + head["comm_cycles"]) / clock * scale,
            "io_s": crossings * x * scale, "hops": L * layer["hops"]}


def _speculative_tpot(w, model, draft, *, P, batch, context, devices, draft_len, acceptance, mapping,
                      expert_groups=0.0, draft_expert_groups=0.0, head_regions=1.0, draft_head_regions=1.0):
    """Seconds per emitted token with the draft on the same wafers (regions of side P, its
    crossings between systems not counted): k draft steps, then the target verifying k+1
    rows per sequence, both pipelined as decode_step."""
    k = np.asarray(draft_len, float)
    kw = dict(P=P, batch=batch, context=context, mapping=mapping)
    draft_s = decode_step(w, draft, devices=1.0, expert_groups=draft_expert_groups, head_regions=draft_head_regions,
                          **kw)["step_s"]
    verify_s = decode_step(w, model, devices=devices, rows_per_sequence=k + 1.0, expert_groups=expert_groups,
                           head_regions=head_regions, **kw)["step_s"]
    return per_token_s(draft_step_s=draft_s, verify_step_s=verify_s, draft_len=k, acceptance=acceptance)


def wafer_inference(*, w: WaferNumbers, model: ModelSpec, devices, batch, prompt,
                    generate, weights: str, kv: str, pe_grid=None, prefill_pe_grid=None,
                    mapping: str = "mesh", draft: ModelSpec | None = None, draft_len=0.0, acceptance=1.0) -> dict:
    """Prefill + static-batch decode on `devices` CS systems. Sizes are ndarrays. With a
    `draft` model and draft_len k > 0, speculative decoding: the draft's layers have
    regions on the same wafers (same side; its crossings between systems not counted), k
    draft steps then one target step over k+1 rows per sequence (speculative.per_token_s)."""
    clock = w.clock_hz  # the clock_hz knob sweeps it
    w_bytes, kv_bytes = DTYPE_BYTES[weights], DTYPE_BYTES[kv]
    context = prompt + generate / 2.0  # mean decode context (steps are linear in it)
    kw = dict(devices=devices, batch=batch, tokens=prompt + generate, generated=generate,
              w_bytes=w_bytes, kv_bytes=kv_bytes, mapping=mapping, draft=draft if np.any(draft_len > 0) else None)
    speculating = (draft_len, acceptance) if kw["draft"] is not None else ()  # the grid search weighs them
    shape = np.broadcast_shapes(np.broadcast(devices, batch, prompt, generate, 0.0 if pe_grid is None else pe_grid,
                                             0.0 if prefill_pe_grid is None else prefill_pe_grid,
                                             *speculating).shape, w.shape)

    if pe_grid is None:
        cand = grid_candidates(w)
        ex = lambda a: np.expand_dims(np.asarray(a, dtype=float), -1)  # noqa: E731
        kwc = {k: (v if v is None or isinstance(v, (float, str, ModelSpec)) else ex(v)) for k, v in kw.items()}
        wc = w.with_trailing_axis()  # knob arrays broadcast against the candidate axis

        def decode_cost(Pc):  # seconds per token: every layer and the lm_head (and the draft's steps)
            place_c = placement(wc, model, P=Pc, **kwc)
            sizes = dict(P=Pc, batch=ex(batch), context=ex(context), devices=ex(devices), mapping=mapping,
                         expert_groups=place_c["expert_groups"], head_regions=place_c["head_regions"])
            if kw["draft"] is None:
                step_s = decode_step(wc, model, **sizes)["step_s"]
            else:
                step_s = _speculative_tpot(wc, model, draft, draft_len=ex(draft_len), acceptance=ex(acceptance),
                                           draft_expert_groups=place_c["draft_expert_groups"],
                                           draft_head_regions=place_c["draft_head_regions"], **sizes)
            return step_s, place_c["fits"], place_c["overflow"]

        # Where nothing fits, the grid closest to fitting is reported (flagged, its times NaN).
        P_dec = _best_grid(decode_cost, cand, shape)
    else:
        P_dec = np.asarray(pe_grid, dtype=float)
    # Prefill runs where the weights are: the decode regions, unless a prefill grid is given
    # (WaferLLM re-lays the weights out between phases; that cost is not modelled). Its
    # chunks hold the activation rows the layer regions' weights and cache leave room for
    # (placement's room_rows; wafer_pipeline.pipelined_prefill picks the unit).
    P_pre = P_dec if prefill_pe_grid is None else np.asarray(prefill_pe_grid, float)
    # Prefill does not depend on the generated length but its room does (the cache is held
    # for every token): computed on the broadcast of its inputs, then broadcast to every point.
    place_pre = placement(w, model, P=P_pre, **kw)
    groups_pre = place_pre["expert_groups"] if np.any(place_pre["expert_groups"] > 0) else 0.0
    pipe = pipelined_prefill(w, model, P=P_pre, batch=batch, prompt=prompt, devices=devices, mapping=mapping,
                             expert_groups=groups_pre, max_rows=place_pre["room_rows"])
    pipe = {k: np.broadcast_to(v, shape) for k, v in pipe.items()}
    P_dec = np.broadcast_to(P_dec, shape) * 1.0
    P_pre = np.broadcast_to(P_pre, shape) * 1.0
    place = placement(w, model, P=P_dec, **kw)

    head = lm_head(w, model, P=P_dec, rows=batch, head_regions=place["head_regions"], mapping=mapping)
    groups = place["expert_groups"]
    step = decode_step(w, model, P=P_dec, batch=batch, context=context, devices=devices, mapping=mapping,
                       expert_groups=groups, head_regions=place["head_regions"])
    dec_compute_s, dec_reduce_s, io_dec = step["compute_s"], step["comm_s"], step["io_s"]
    tpot = step["step_s"]
    extra = {}
    if kw["draft"] is not None:
        tpot = _speculative_tpot(w, model, draft, P=P_dec, batch=batch, context=context, devices=devices,
                                 draft_len=draft_len, acceptance=acceptance, mapping=mapping, expert_groups=groups,
                                 draft_expert_groups=place["draft_expert_groups"], head_regions=place["head_regions"],
                                 draft_head_regions=place["draft_head_regions"])
        extra["tokens_per_step"] = expected_tokens_per_step(acceptance=acceptance, draft_len=draft_len) \
            + np.zeros(np.shape(tpot))
    zero = np.zeros(np.shape(tpot))  # counts and sizes broadcast to every point
    ttft = pipe["ttft_s"] + head["cycles"] / clock  # the last token's logits
    e2e = ttft + (generate - 1.0) * tpot
    out_tokens = batch * generate

    fits_pre = place_pre["fits_regions"] & np.isfinite(pipe["ttft_s"])
    fits = place["fits"] & fits_pre
    reason = _reason(w, model, place, fits_pre, searched=pe_grid is None, kw=kw)
    # A PE's FMA vector reads a weight and a partial sum per element: when that exceeds the
    # memory ports' rate the SIMD unit idles and local memory bandwidth is the bound.
    bound = choose([(~fits, "capacity"), (io_dec >= np.maximum(dec_compute_s, dec_reduce_s), "inter_system_io"),
                    (dec_reduce_s >= dec_compute_s, "mesh_reduction"), (memory_port_bound(w), "local_memory")],
                   "compute")
    pes_used = (place["regions_needed"] - place["head_regions_needed"] + place["head_regions"]) * P_dec * P_dec
    out = {
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e,
        "ttft_client_s": ttft + w.service_request_latency_s,  # as a client of the vendor's service sees it
        "output_tokens_per_s": out_tokens / e2e,
        "output_tokens_per_s_per_device": out_tokens / e2e / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot,
        # the fullest PE of a region of each kind times its PEs (expert regions hold no cache),
        # less each PE's reserve, as the capacity beside it (usable_sram_bytes)
        "memory_per_device_bytes": ((place["pe_bytes"] - w.sram_reserved_per_pe_bytes)
                                    * (place["regions_needed"] - place["expert_regions"])
                                    + (place["expert_region_bytes"] - w.sram_reserved_per_pe_bytes)
                                    * place["expert_regions"]) * P_dec ** 2 / devices,
        "memory_capacity_bytes": usable_sram_bytes(w) + zero,
        "fits": fits, "reason": reason, "bound": bound,
        "decode_compute_s": dec_compute_s, "decode_comm_s": dec_reduce_s, "decode_io_s": io_dec,
        "prefill_unpipelined_s": pipe["unpipelined_s"] + head["cycles"] / clock,
        "prefill_stage_busy_s": pipe["stage_busy_s"] + head["cycles"] / clock,
        "prefill_compute_bound_s": pipe["compute_bound_s"], "prefill_chunk_tokens": pipe["chunk_tokens"],
        "prefill_chunk_sequences": pipe["chunk_sequences"],
        "pe_grid_decode": P_dec, "pe_grid_prefill": P_pre, "n_pes_used": pes_used,
        "pe_memory_used_bytes": place["pe_bytes"],
        # the fullest layer PE while prefill runs its chunks (weights, the whole cache, the chunk's rows)
        "prefill_pe_memory_used_bytes": place_pre["fixed_bytes"] + pipe["rows_per_pe"] * place_pre["row_bytes"],
        "lm_head_regions": place["head_regions"] + zero,
        "n_hops_per_token": step["hops"], "decode_micro_batches": step["micro_batches"],
        "expert_regions_per_layer": groups + zero,
        "batch": batch * 1.0 + zero, "devices": devices * 1.0 + zero, **extra,
    }
    return no_times_where(out, ~fits)


def _reason(w: WaferNumbers, model: ModelSpec, place: dict, fits_pre, *, searched: bool, kw: dict):
    """Why a point does not fit, the first that holds: a layer's weights that no region holds
    (not even the largest square), regions that need more PEs than the wafers have (with
    the grid searched: also where the grid closest to fitting cannot hold a layer's weights,
    since a larger one would not fit on the wafers), a layer's weights beyond the SRAM of
    the grid given, a KV cache beyond what the weights leave, the prefill grid."""
    weights, regions_, pe = place["fits_weights"], place["fits_regions"], place["fits_pe"]
    if np.all(weights) or np.all(place["fits"] & fits_pre):
        largest = True
    else:
        largest = placement(w, model, P=w.max_square_grid + 0.0 * np.asarray(place["pe_bytes"]), **kw)["fits_weights"]
    return choose([(~weights & ~largest, "a layer's weights exceed the SRAM of even the largest square region"),
                   (~regions_ | (searched & ~weights), "the layer regions do not fit on the wafers"),
                   (~weights, "a layer's weights and buffers exceed the SRAM of its region's PEs"),
                   (~pe, "the KV cache overflows the SRAM a layer region's weights leave"),
                   (~fits_pre, "the prefill grid does not fit")], "")


def usable_sram_bytes(w: WaferNumbers):
    """What a wafer's program can hold: every PE's SRAM less what each reserves (the one
    definition of memory_capacity_bytes on wafers: inference, streaming, training)."""
    return w.usable_sram_per_pe_bytes * w.program_pes


def no_times_where(out: dict, unplaced) -> dict:
    """Times and rates NaN where the layout cannot be placed (fits=False from the placement):
    a wafer's memory is its layout (regions of PEs), so a point whose regions or whose PEs'
    SRAM do not hold the model has no layout to time, as a GPU layout that cannot run
    (backends.flag_invalid); its memory, grid and region outputs stay, to show how far it is
    from fitting. Outputs in seconds (`*_s`) and per second (`*_per_s`, `*_per_s_*`) are the times."""
    unplaced = np.asarray(unplaced, dtype=bool)
    if not unplaced.any():
        return out
    timed = [k for k in out if k.endswith(("_s", "_per_s")) or "_per_s_" in k]
    return {k: np.where(unplaced, np.nan, v) if k in timed else v for k, v in out.items()}
