"""Spec catalog: one YAML file per chip and per model, loaded into frozen dataclasses.

A new chip or model is a new YAML file in `hardware/` or `models/`; nothing else changes.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from pathlib import Path

from ..errors import InputError, brief
from ._base import SpecError, build, read_yaml
from .hardware import EfficiencyTable, HardwareSpec, Link, MemoryTier, hardware_from_dict
from .model import ModelSpec
from .wafer import SystemSpec, WaferSpec, wafer_from_dict

_HERE = Path(__file__).parent
HARDWARE_DIR = _HERE / "hardware"
MODELS_DIR = _HERE / "models"

__all__ = ["EfficiencyTable", "HardwareSpec", "Link", "MemoryTier", "ModelSpec", "SpecError",
           "SystemSpec", "WaferSpec", "list_gpus", "list_hardware", "list_models", "list_wafers",
           "load_hardware", "load_model", "is_wafer", "kind_of", "system_of", "MODEL_KNOBS",
           "with_model_knobs", "hf_index"]


@lru_cache(maxsize=16)
def _stems(folder: Path, pattern: str, mtime_ns: int) -> tuple:
    return tuple(sorted(p.stem for p in folder.glob(pattern)))


def folder_stems(folder: Path, pattern: str = "*.yaml") -> list[str]:
    """The sorted stems of `folder`'s files matching `pattern`, listed once per state of the
    folder (its mtime): a scalar prediction looks the catalog up several times, and globbing
    each time cost it more than its model."""
    return list(_stems(folder, pattern, folder.stat().st_mtime_ns))


def list_hardware() -> list[str]:
    """Every hardware name: GPUs, wafers (wse2, wse3) and wafer systems (cs2, cs3)."""
    return folder_stems(HARDWARE_DIR)


def _kind(name: str) -> str:
    return read_yaml(HARDWARE_DIR / f"{name}.yaml").get("kind", "gpu")


def list_gpus() -> list[str]:
    return [n for n in list_hardware() if _kind(n) == "gpu"]


def list_wafers() -> list[str]:
    """Wafer chips and the systems that hold them."""
    return [n for n in list_hardware() if _kind(n) != "gpu"]


def is_wafer(spec) -> bool:
    """A wafer or a wafer system (data about the spec; predict dispatches on `kind`)."""
    return isinstance(spec, (WaferSpec, SystemSpec))


def kind_of(spec) -> str:
    """The `kind` a backend is registered for: gpu, wafer or system."""
    return getattr(spec, "kind", "gpu")


def list_models() -> list[str]:
    return folder_stems(MODELS_DIR)


def _merge(base, change, key: str = "", origin: str = ""):
    """`change` laid over `base`: mappings merge key by key, a list of named entries (memory
    tiers, links) merges entry by entry (_merge_named), anything else is replaced."""
    if isinstance(base, dict) and isinstance(change, dict):
        return {**base, **{k: _merge(base[k], v, k, origin) if k in base else v for k, v in change.items()}}
    if isinstance(base, list) and isinstance(change, list) and all(isinstance(e, dict) and "name" in e
                                                                    for e in base + change):
        return _merge_named(key, base, change, origin)
    return change


def _merge_named(key: str, base: list, change: list, origin: str) -> list:
    """A derived file's memory tiers or links over the base's. An entry replaces the base's
    entry of its name; one of a new name replaces the base's device memory (memory) or the
    base's link of its `scope` (links), its fields laid over that entry's (the base's `source`
    dropped: another part). A spec reads one tier and one link per scope, so an entry that
    would replace what another entry already replaces is an error (a second one, unread)."""
    out, taken = list(base), set()
    for entry in change:
        same = [i for i, e in enumerate(base) if e["name"] == entry["name"]]
        if not same and key == "links" and entry.get("scope") is None:
            raise SpecError(origin, f"links.{entry['name']}.scope", None, "scale_up or scale_out: a link of a new "
                            "name replaces the base's link of that scope")
        if not same and key in ("memory", "links"):
            same = [i for i, e in enumerate(base) if key == "memory" or e.get("scope") == entry.get("scope")][:1]
            if same and same[0] not in taken:
                out[same[0]] = {k: v for k, v in out[same[0]].items() if k != "source"}
        if same and same[0] in taken:
            what = "tier" if key == "memory" else f"{base[same[0]].get('scope')} link"
            raise SpecError(origin, f"{key}.{entry['name']}", entry["name"], f"one entry per {what}: "
                            f"{base[same[0]]['name']!r} is already replaced (a second one is read by no model)")
        if same:
            taken.add(same[0])
            out[same[0]] = _merge(out[same[0]], entry)
        else:
            out.append(entry)
    return out


def _derived(data: dict, origin: str) -> dict:
    """A hypothetical design: `derives_from` names a catalog chip, `changes` says in words
    what differs, and the other keys replace the base's (merged as _merge says); the
    statement lands in the spec's source (GPUs) or notes (wafers, systems)."""
    data = dict(data)
    base_name, changes = data.pop("derives_from"), data.pop("changes", None)
    if base_name not in list_hardware():
        raise SpecError(origin, "derives_from", base_name, f"a catalog hardware name ({', '.join(list_hardware())})")
    if not isinstance(changes, str) or not changes.strip():
        raise SpecError(origin, "changes", changes, "a sentence saying what differs from the base chip")
    if "name" not in data:
        raise SpecError(origin, "name", None, "a name of its own for the derived design")
    base = read_yaml(HARDWARE_DIR / f"{base_name}.yaml")
    merged = _merge(base, data, origin=origin)
    field = "source" if base.get("kind", "gpu") == "gpu" else "notes"
    merged[field] = f"derived from {base_name}: {changes.strip()} (base: {base.get(field) or base.get('source', '')})"
    if field == "notes":
        merged.setdefault("source", base.get("source", ""))
    return merged


def _hardware_from(data: dict, origin: str):
    if "derives_from" in data:
        data = _derived(data, origin)
    kinds = ("gpu", "wafer", "system")
    if data.get("kind", "gpu") not in kinds:
        raise SpecError(origin, "kind", data.get("kind"), f"one of {kinds}")
    if data.get("kind", "gpu") != "gpu":
        return wafer_from_dict(data, origin=origin)
    data = {k: v for k, v in data.items() if k != "kind"}
    return hardware_from_dict(data, origin=origin)


@lru_cache(maxsize=None)
def _hardware(name: str):
    return _hardware_from(read_yaml(HARDWARE_DIR / f"{name}.yaml"), origin=name)


def _is_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


@lru_cache(maxsize=None)
def _model(name: str) -> ModelSpec:
    return build(ModelSpec, read_yaml(MODELS_DIR / f"{name}.yaml"), origin=name)


def load_hardware(name, *, arg: str = "hardware"):
    """A GPU HardwareSpec, a WaferSpec (wse2, wse3) or a SystemSpec (cs2, cs3): from a
    spec object (returned as it is), a catalog name (or a name as vendors and benchmark tables
    write it that names exactly one: "NVIDIA H100 SXM", "AMD Instinct MI300X", hardware_names),
    or the path of a YAML file in the catalog's format (its `name:` labels the results), whole
    or as a hypothetical design that `derives_from` a catalog chip with the fields that change
    (examples/hardware/)."""
    if isinstance(name, (HardwareSpec, WaferSpec, SystemSpec)):
        return name
    if isinstance(name, (str, Path)) and _is_path(str(name)):
        path = Path(name)
        if not path.is_file():
            raise InputError(f"{arg}={brief(str(name))} is not a readable file; allowed: a catalog name "
                             f"({', '.join(list_hardware())}) or the path of a hardware YAML file")
        return _hardware_from(read_yaml(path, arg=arg), origin=str(path))
    known = list_hardware()
    if isinstance(name, str) and name not in known:  # "NVIDIA H100 SXM", "AMD Instinct MI300X"
        from . import hardware_names
        name = hardware_names.resolve(name, known) or name
    if not isinstance(name, str) or name not in known:
        raise InputError(f"{arg}={brief(name)} is not known; allowed: {', '.join(known)}, "
                         "a spec object or the path of a hardware YAML file")
    return _hardware(name)


def system_of(spec) -> tuple:
    """(system, wafer) specs for a wafer system (cs2, cs3) or a bare wafer, which runs in
    the system its spec names (`system:`)."""
    if isinstance(spec, SystemSpec):
        return spec, load_hardware(spec.wafer, arg=f"{spec.name}.wafer")
    if not spec.system:
        raise InputError(f"hardware={spec.name!r} is a bare wafer without `system:`; allowed: a wafer spec "
                         "naming the CS system that houses it, or a system spec")
    return load_hardware(spec.system, arg=f"{spec.name}.system"), spec


# Model fields a user may override (model_overrides; a list sweeps them): the sizes that
# model-size asymptotics vary. `top_k` is the routed experts per token (n_active_experts).
MODEL_KNOBS = {"n_layers": "n_layers", "d_model": "d_model", "n_heads": "n_heads", "n_kv_heads": "n_kv_heads",
               "head_dim": "head_dim", "d_ff": "d_ff", "d_ff_expert": "d_ff_expert", "n_experts": "n_experts",
               "top_k": "n_active_experts", "vocab_size": "vocab_size"}


def with_model_knobs(spec: ModelSpec, overrides: dict) -> ModelSpec:
    """`spec` with the MODEL_KNOBS in `overrides` set (one value each); the name says so."""
    import dataclasses
    unknown = [k for k in overrides if k not in MODEL_KNOBS]
    if unknown:
        raise InputError(f"model_overrides key {unknown[0]!r} is not a model knob; allowed: {', '.join(MODEL_KNOBS)}")
    changes = {}
    for k, v in overrides.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or v != int(v) or v < 0:
            raise InputError(f"model_overrides {k}={v!r} is not allowed; allowed: an integer >= 0")
        changes[MODEL_KNOBS[k]] = int(v)
    label = ",".join(f"{k}={int(v)}" for k, v in overrides.items())
    try:
        return dataclasses.replace(spec, name=f"{spec.name}[{label}]", **changes)
    except SpecError as e:
        raise InputError(f"model_overrides {label}: {e}") from None


def _model_file(path: Path, arg: str) -> ModelSpec:
    """A YAML file of ModelSpec fields, or a Hugging Face config.json."""
    from .hf_config import fields_from_hf_config, is_hf_config
    if not path.is_file():
        raise InputError(f"{arg}={brief(str(path))} is not a readable file; allowed: a catalog name "
                         f"({', '.join(list_models())}), a model YAML file or a config.json")
    data = read_yaml(path, arg=arg)  # JSON is YAML; not UTF-8 or not YAML: InputError
    if is_hf_config(data):
        try:
            fields = fields_from_hf_config(data, origin=str(path))
        except InputError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as e:  # a key of the wrong type
            raise InputError(f"{arg}={brief(str(path))}: a config.json key has a value of the wrong type "
                             f"({brief(str(e))}); allowed: the numbers and booleans transformers writes") from None
        # its id's last part, else its folder's name for a file called config.json, else the file's
        folder = path.parent.name if path.name == "config.json" else ""
        fields.update(name=str(data.get("_name_or_path") or folder or path.stem).split("/")[-1],
                      source=f"Hugging Face config.json ({path})")
        return build(ModelSpec, fields, origin=str(path))
    data.setdefault("name", path.stem)
    data.setdefault("source", f"model file {path}")
    return build(ModelSpec, data, origin=str(path))


def _is_hf_id(name: str) -> bool:
    """"org/name": one slash, no file suffix, no path syntax."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and \
        not name.endswith((".json", ".yaml", ".yml"))


@lru_cache(maxsize=1)
def hf_index() -> dict:
    """Hugging Face id -> catalog model name (each model YAML's hf_ids)."""
    return {i: m for m in list_models() for i in _model(m).hf_ids}


@lru_cache(maxsize=1)
def _hf_keys() -> dict:
    """Architecture key -> catalog model name over every listed id (hf_names.keyed)."""
    from . import hf_names
    return hf_names.keyed(hf_index())


def catalog_name(hf_id: str) -> str | None:
    """The catalog model of a Hugging Face id: the entry that lists it, else the one its
    name matches as a post-training or quantized variant (hf_names: not a dated or versioned
    release, whose config may differ), else None."""
    from . import hf_names
    return hf_index().get(hf_id) or _hf_keys().get(hf_names.key(hf_id))


def load_model(name, *, arg: str = "model") -> ModelSpec:
    """A catalog name, a Hugging Face id a catalog model records (hf_ids), a ModelSpec, a
    dict of ModelSpec fields (a model not in the catalog), or the path of a model YAML file
    or a Hugging Face config.json."""
    if isinstance(name, ModelSpec):
        return name
    if isinstance(name, dict):
        data = dict(name)
        data.setdefault("name", "custom")
        data.setdefault("source", "user-supplied dict")
        return build(ModelSpec, data, origin=data["name"])
    if isinstance(name, str) and _is_hf_id(name) and not Path(name).exists():  # "deepseek-ai/DeepSeek-R1"
        import dataclasses
        from . import hf_names
        matched = catalog_name(name)
        if matched is None:
            near = hf_names.closest(name, hf_index())
            raise InputError(f"{arg}={brief(name)} is neither a file nor the id of a catalog architecture; allowed: "
                             f"an id a catalog entry lists (nearest: {', '.join(near) or 'none'}), the same id "
                             "with a post-training or quantized variant's words (a dated or versioned release "
                             "only where an entry lists it), a catalog name, a model YAML file or a config.json")
        return dataclasses.replace(_model(matched), checkpoint=name)  # a listed checkpoint's KV format is known
    if isinstance(name, (str, Path)) and (str(name).endswith((".json", ".yaml", ".yml")) or "/" in str(name)):
        return _model_file(Path(name), arg)
    if not isinstance(name, str) or name not in list_models():
        raise InputError(f"{arg}={brief(name)} is not known; allowed: {', '.join(list_models())}, a dict of model "
                         "fields, or the path of a model YAML file or config.json")
    return _model(name)
