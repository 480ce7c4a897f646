"""A hardware name as vendors, papers and benchmark tables write it, matched to the catalog.

"NVIDIA H100 SXM (Azure ND H100 v5)", "AMD Instinct MI300X", "Intel Gaudi 3", "NVIDIA B200 SXM",
"H200 SXM 141GB (700W)" and "Cerebras CS-3 (WSE-3)" name catalog chips (h100_sxm, mi300x, gaudi3,
b200, h200_sxm, cs3). A name that is not a catalog name is reduced to a key: lower case, what is in
parentheses dropped (the system or cloud it ran in), the words that name a vendor or product line
(VENDOR_WORDS), a memory size, type or power ("80GB", "HBM3e", "700W"), a device count ("x8") or a
rack ("NVL72") dropped, a DGX / HGX system prefix dropped, the rest joined without separators,
SXM4 / SXM5 read as SXM. A catalog chip's key is its name without underscores (h100_sxm:
"h100sxm"). The name resolves to the chip whose key it equals; failing that, to the chip its key
names with a module form (FORM_WORDS) added or removed, when exactly one chip does ("H200" is
h200_sxm, "B200 SXM" is b200); failing that, a name that mentions a DGX or HGX system anywhere
takes the SXM form, the module those boards carry (NVIDIA DGX A100 / DGX H100 datasheets: "NVIDIA
A100 80GB (DGX A100, Selene)" is a100_sxm). "H100 80GB" names both h100_sxm and h100_pcie: no
match, and the caller's error lists the names.
"""
from __future__ import annotations

import re

VENDOR_WORDS = frozenset({"nvidia", "amd", "intel", "habana", "cerebras", "instinct", "tesla"})
FORM_WORDS = ("sxm", "pcie", "oam")  # module forms a chip's catalog name may carry
DROPPED = re.compile(r"^(\d+(\.\d+)?(gb|gib|tb|w)|hbm\d?e?|x\d+|nvl\d+|\d+x)$")  # 80gb, 700w, hbm3e, x8, nvl72
SYSTEM = "[dh]gx"  # NVIDIA DGX / HGX systems: SXM modules


def key(text: str) -> str:
    """The matching key of a hardware name (see the module)."""
    text = re.sub(r"\([^)]*\)", " ", str(text).lower())
    words = [re.sub(f"^{SYSTEM}-?", "", w) for w in re.split(r"[\s,/]+", text)]
    words = [w for w in words if w and w not in VENDOR_WORDS and not DROPPED.match(w)]
    return re.sub(r"sxm[45]$", "sxm", re.sub(r"[^a-z0-9]", "", "".join(words)))


def resolve(text: str, names: list[str]) -> str | None:
    """The catalog name (of `names`) that `text` names, or None (see the module)."""
    keys = {n.replace("_", ""): n for n in names}
    k = key(text)
    if k in keys:
        return keys[k]
    found = {keys[k + f] for f in FORM_WORDS if k + f in keys}
    found |= {keys[k[:-len(f)]] for f in FORM_WORDS if k.endswith(f) and k[:-len(f)] in keys}
    if len(found) > 1 and re.search(SYSTEM, str(text).lower()) and k + "sxm" in keys:
        return keys[k + "sxm"]
    return found.pop() if len(found) == 1 else None
