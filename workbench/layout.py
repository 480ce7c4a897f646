"""Layouts: how a workload is mapped onto hardware, the third input beside the
architecture (specs) and the workload (workloads/ops.py). predict.* keeps its keyword
interface; these are what it builds, and what decides whether a layout can run.

Each word keeps one meaning:
- GPU: `tp`, `pp`, `cp`, `ep` split one model replica (training: `expert_tp` splits each
  routed expert, Megatron-Core's expert tensor parallelism, tp by default); `dp` counts
  replicas; `devices` is every GPU, tp·pp·dp·cp.
- wafer: `systems` is the CS systems of one model instance: with `placement="regions"`
  the model is pipelined across them, with `placement="streaming"` each holds a replica
  (predict's `devices` argument is this number on wafers); `pe_grid` is the side of a
  layer's PE region (None: searched), `mapping` the kernels' mesh mapping.

Sizes may be arrays (one value per sweep point). A layout that cannot run is not an
error: `problems` lists, per condition, the points where it holds and the reason, and the
backend turns them into fits=False points (backends.flag_problems). `context_problems`
does the same for sequences longer than the model's context window.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _whole(x) -> np.ndarray:
    x = np.asarray(x, float)
    return x == np.floor(x)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


@dataclass(frozen=True)
class Problem:
    """Points where a layout cannot run (`where`), the sizes that name them in the reason
    (`values`) and the reason for one combination of those sizes (`message`)."""
    where: object
    values: dict
    message: object  # (**sizes as text) -> str
    keep_numbers: bool = False  # True: a configuration the hardware computes but cannot serve (fits=False only)


def context_problems(model, **lengths) -> list[Problem]:
    """Inference over more tokens than the model's context window (`max_seq_len`, the
    released config's max_position_embeddings) is a real configuration that cannot run:
    fits=False with the reason, its costs kept (as for one that exceeds memory). It counts
    prompt + generate, as vLLM's max_model_len check does. Training is not held to it: a
    run sets its own context (LLM Foundry trains MPT-7B, released at 2048, at 65536
    tokens: calibrate rows MF05, MF15; Llama 3.1 extended the 8k Llama 3 to 128k)."""
    total = sum(np.asarray(v, float) for v in lengths.values())
    names = "+".join(lengths)
    return [Problem(total > model.max_seq_len, dict(lengths),
                    lambda **v: f"{names}={'+'.join(v.values())} exceeds max_seq_len={model.max_seq_len} of "
                                f"{model.name}", keep_numbers=True)]


@dataclass(frozen=True)
class GpuLayout:
    tp: object = 1.0
    pp: object = 1.0
    dp: object = 1.0
    cp: object = 1.0
    ep: object = 1.0
    micro_batch: object = 1.0
    virtual_stages: object = 1.0
    zero: int = 1
    recompute: str = "none"
    expert_tp: object = None  # ranks each routed expert is split over (training; None: tp)
    devices_asked: object = None  # the devices the user gave, when given (checked against the product)

    @property
    def devices(self):
        """Every GPU of the layout: tp·pp·dp·cp."""
        return self.tp * self.pp * self.dp * self.cp

    @classmethod
    def for_inference(cls, *, tp, pp, ep=1.0, devices=None) -> "GpuLayout":
        """Inference: devices beyond tp·pp run data-parallel replicas (default: none)."""
        devices = tp * pp if devices is None else devices
        return cls(tp=tp, pp=pp, ep=ep, dp=devices / (tp * pp), devices_asked=devices)

    @classmethod
    def for_training(cls, *, tp, pp, cp, ep, micro_batch, virtual_stages, zero, recompute, dp=None,
                     devices=None, expert_tp=None) -> "GpuLayout":
        """Training: dp defaults to devices / (tp·pp·cp) (one replica without devices);
        expert_tp to tp (Megatron-Core's default expert tensor parallelism)."""
        group = tp * pp * cp
        if dp is None:
            dp = (group if devices is None else devices) / group
        return cls(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, micro_batch=micro_batch, virtual_stages=virtual_stages,
                   zero=zero, recompute=recompute, devices_asked=devices, expert_tp=tp if expert_tp is None else expert_tp)

    def problems(self, model, *, phase: str, seq_len=None, global_batch=None) -> list[Problem]:
        """What makes this layout unable to run `model` (phase "inference" or "training"),
        the most basic first: the reason shown is the first that holds."""
        tp, pp, ep, heads = self.tp, self.pp, self.ep, model.n_heads
        out = [Problem(np.mod(heads, tp) != 0, {"tp": tp},
                       lambda tp: f"tp={tp} does not divide n_heads={heads} of {model.name}; "
                                  f"allowed: {_divisors(heads)}"),
               Problem(np.asarray(pp) > model.n_layers, {"pp": pp},
                       lambda pp: f"pp={pp} exceeds n_layers={model.n_layers} of {model.name}")]
        if phase == "inference":
            out.append(Problem(~_whole(self.dp) | (self.dp < 1), {"devices": self.devices_asked, "tp_pp": tp * pp},
                               lambda devices, tp_pp: f"devices={devices} is not a multiple of tp*pp={tp_pp} "
                                                      "(the extra devices are data-parallel replicas)"))
            if model.is_moe:
                out.append(Problem(np.mod(tp, ep) != 0, {"ep": ep, "tp": tp},
                                   lambda ep, tp: f"ep={ep} does not divide tp={tp} (experts are spread over "
                                                  "the TP devices)"))
        else:
            out += self._training_problems(model, seq_len=seq_len)
        if not model.is_moe:
            out.append(_dense_ep(model, ep))
        if phase != "inference" and global_batch is not None:  # last: it keeps its numbers, the others do not
            # global_batch_size % (micro_batch_size * data_parallel_size); fewer sequences than
            # that: the workload's own reason
            dp, per = self.dp, self.dp * self.micro_batch
            out.append(Problem(_whole(dp) & (np.asarray(global_batch) >= per) & (np.mod(global_batch, per) != 0),
                               {"global_batch": global_batch, "dp_x_micro_batch": per},
                               lambda global_batch, dp_x_micro_batch: f"global_batch={global_batch} is not a multiple "
                                                                       f"of dp*micro_batch={dp_x_micro_batch}",
                               keep_numbers=True))
        return out

    def _training_problems(self, model, *, seq_len) -> list[Problem]:
        """Megatron-Core's layout checks (megatron/training/arguments.py, core/parallel_state.py)."""
        tp, pp, cp, ep, dp, v = self.tp, self.pp, self.cp, self.ep, self.dp, self.virtual_stages
        group, kv = tp * pp * cp, model.n_kv_heads
        out = [Problem(~_whole(dp) | (dp < 1), {"group": group},
                       lambda group: f"devices is not a multiple of tp*pp*cp={group}"),
               # each rank holds whole query groups (num_query_groups % tensor_model_parallel_size)
               Problem(np.mod(kv, tp) != 0, {"tp": tp},
                       lambda tp: f"tp={tp} does not divide n_kv_heads={kv} of {model.name} (training holds whole "
                                  f"KV heads a rank); allowed: {_divisors(kv)}"),
               # every virtual stage holds at least one layer, the embedding and the loss counted
               # as one each (--account-for-embedding/loss-in-pipeline-split: Llama-3.1-405B's
               # 126 layers run as 16 x 8 virtual stages, measurements.csv NN25)
               Problem(np.asarray(pp) * v > model.n_layers + 2, {"pp": pp, "virtual_stages": v},
                       lambda pp, virtual_stages: f"pp*virtual_stages={pp}*{virtual_stages} exceeds n_layers+2="
                                                  f"{model.n_layers + 2} of {model.name} (each virtual stage holds "
                                                  "at least one layer, the embedding or the loss)")]
        if seq_len is not None:  # causal CP splits each sequence into 2·cp load-balanced chunks
            out.append(Problem((np.asarray(cp) > 1) & (np.mod(seq_len, 2 * np.asarray(cp)) != 0),
                               {"seq_len": seq_len, "cp": cp},
                               lambda seq_len, cp: f"seq_len={seq_len} is not a multiple of 2*cp={2 * float(cp):g} "
                                                   "(context parallelism splits each sequence into 2*cp chunks)"))
        if self.devices_asked is not None:
            out.append(Problem(np.asarray(self.devices_asked) != self.devices,
                               {"devices": self.devices_asked, "layout": self.devices},
                               lambda devices, layout: f"devices={devices} != tp*pp*dp*cp={layout}"))
        if model.is_moe:
            out.append(Problem(np.mod(model.n_experts, ep) != 0, {"ep": ep},
                               lambda ep: f"ep={ep} does not divide n_experts={model.n_experts} of {model.name}"))
            # Megatron-Core carves each expert group of expert_tp·ep ranks out of a stage's
            # tp·dp·cp ranks (core/parallel_state.py: its expert rank generator)
            etp, ranks = self.expert_tp, tp * dp * cp
            out.append(Problem(np.mod(ranks, ep * etp) != 0, {"ep": ep, "expert_tp": etp, "ranks": ranks},
                               lambda ep, expert_tp, ranks: f"ep*expert_tp={ep}*{expert_tp} does not divide "
                                                            f"tp*dp*cp={ranks} (each expert group spans ep*expert_tp "
                                                            "of a stage's tp*dp*cp ranks)"))
        return out


@dataclass(frozen=True)
class WaferLayout:
    systems: object = 1.0
    pe_grid: object = None  # None: the fastest side that fits is searched
    mapping: str = "mesh"
    placement: str = "regions"

    def problems(self, model, *, phase: str, global_batch=None) -> list[Problem]:
        """Inference with placement "regions" pipelines the layers across the systems, so
        each system must hold at least one layer (or, for a MoE model, one of a layer's
        expert regions: at most one per expert, wafer_layers.layer_memory_per_pe); training
        runs the systems data-parallel, so each needs at least one sequence of the global
        batch. Capacity is the placement model's, flagged point by point."""
        systems = np.asarray(self.systems, float)
        if phase == "inference":
            if self.placement != "regions":
                return []
            units = model.n_layers + model.n_moe_layers * model.n_experts
            what, held = (f"n_layers={model.n_layers}", "one layer") if units == model.n_layers else \
                (f"the {units} layer and expert regions", "one layer or expert region")
            return [Problem(systems > units, {"devices": systems},
                            lambda devices: f"devices={devices} systems exceed {what} of "
                                            f"{model.name} (each pipelined system holds at least {held})")]
        if global_batch is None:
            return []
        return [Problem(systems > np.asarray(global_batch, float), {"devices": systems, "global_batch": global_batch},
                        lambda devices, global_batch: f"devices={devices} systems exceed global_batch={global_batch} "
                                                      "(each data-parallel system trains at least one sequence)")]


def serving_problems(model, *, tp, attention_dp, ep, prefix: str = "", pp=1.0) -> list[Problem]:
    """What keeps a serving instance (tp x attention_dp GPUs per pipeline stage, pp stages,
    MoE experts split ep-way over a stage's GPUs; an ep that does not divide the experts runs
    redundant copies in the spare slots, workloads/ops.expert_slots) from running `model`;
    `prefix` names a pool ("prefill_", "decode_")."""
    heads, devices = model.n_heads, tp * attention_dp
    out = [Problem(np.mod(heads, tp) != 0, {"tp": tp},
                   lambda tp: f"{prefix}tp={tp} does not divide n_heads={heads} of {model.name}; "
                              f"allowed: {_divisors(heads)}"),
           Problem(np.asarray(pp) > model.n_layers, {"pp": pp},
                   lambda pp: f"{prefix}pp={pp} exceeds n_layers={model.n_layers} of {model.name}")]
    if model.is_moe:
        out += [Problem(np.mod(devices, ep) != 0, {"ep": ep, "devices": devices},
                        lambda ep, devices: f"{prefix}ep={ep} does not divide {prefix}tp*{prefix}attention_dp="
                                            f"{devices} (the experts are spread over the instance's GPUs)"),
                Problem(np.asarray(ep) > model.n_experts, {"ep": ep},
                        lambda ep: f"{prefix}ep={ep} exceeds n_experts={model.n_experts} of {model.name} (each "
                                   "expert-parallel rank holds at least one expert)")]
    else:
        out.append(_dense_ep(model, ep, prefix))
    return out


def _dense_ep(model, ep, prefix: str = "") -> Problem:
    """ep > 1 on a dense model: no experts to spread."""
    return Problem(np.asarray(ep) > 1, {"ep": ep}, lambda ep: f"{prefix}ep={ep} is not allowed for {model.name}: a "
                                                              "dense model has no experts; allowed: 1")
