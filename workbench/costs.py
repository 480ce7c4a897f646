"""Cost axes: dollars and energy per token, from a price per device-hour and the power
each device draws. Prices are market data, not physics: the defaults below are stated
assumptions with their sources, and every function takes `prices=` / `power_w=` to
override them.

    ds = costs.add_costs(predict.inference(hardware=["h100_sxm", "cs3"], ...))
    ds.cost_per_million_tokens_usd, ds.tokens_per_j
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from .errors import InputError
from .specs import HardwareSpec, list_hardware, load_hardware

def catalog_prices() -> dict:
    """USD per device-hour of every catalog chip, from its spec (`price_usd_per_hour`, with
    the source next to it in the YAML: GPU midpoints of the 'specialty cloud' tier of
    mercatus-ai.com, May 2026; B200, MI300X and CS systems ASSUMED). Unknown prices (0)
    are left out."""
    return {n: load_hardware(n).price_usd_per_hour for n in list_hardware() if load_hardware(n).price_usd_per_hour}


PRICE_USD_PER_DEVICE_HOUR = catalog_prices()


def device_power_w(name: str) -> float:
    """Power of one device at full load: GPU TDP (board only, no host or network share),
    or the whole CS system for a wafer (Kundu et al. Table 1; Jacquelin et al. Sec V.C)."""
    spec = load_hardware(name)
    if isinstance(spec, HardwareSpec):
        return spec.tdp_w
    from .specs import system_of
    return system_of(spec)[0].power_w


def _per_hardware(ds: xr.Dataset, table: dict, what: str) -> xr.DataArray:
    if "hardware" not in ds.coords:
        raise InputError("the dataset has no 'hardware' coordinate; allowed: a predict.* result")
    names = np.atleast_1d(ds.hardware.values)
    missing = [n for n in names if n not in table]
    if missing:
        raise InputError(f"{what} for hardware={missing[0]!r} is not known; pass {what}={{...}} "
                         f"(known: {', '.join(sorted(table))})")
    values = [float(table[n]) for n in names]
    if ds.hardware.ndim == 0:
        return xr.DataArray(values[0])
    return xr.DataArray(values, dims=["hardware"], coords={"hardware": names})


def cost_per_million_tokens_usd(price_usd_per_hour, tokens_per_s_per_device):
    """USD per million tokens from a device's hourly price and the tokens it sustains
    (NaN where the price is not known, 0)."""
    from .primitives._array import in_place, where
    price = where(price_usd_per_hour > 0, price_usd_per_hour, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return in_place(np.multiply, price / 3600.0 / tokens_per_s_per_device, 1e6)


def tokens_per_j(tokens_per_s_per_device, power_w):
    """Tokens per joule of one device: its token rate over the power it draws."""
    return tokens_per_s_per_device / power_w


# the rate each workload's cost is counted on: output tokens served, or tokens trained
RATES = ("output_tokens_per_s_per_device", "tokens_per_s_per_device")


def per_point(result: dict, *, price_usd_per_hour, power_w) -> dict:
    """A predict.* result with its cost outputs, from the point's hardware knobs (a swept
    price or power sweeps them): `price_usd_per_hour` and `power_w` per device,
    `cost_per_million_tokens_usd` (output tokens for inference and serving, trained tokens
    for training) and `tokens_per_j`. Results without a token rate (kernels) are returned
    as they are."""
    rate = next((result[r] for r in RATES if r in result), None)
    if rate is None:
        return result
    from .primitives._array import zero_of
    zero = zero_of(rate)  # 0.0 * rate: NaN where the rate is not a number
    return {**result, "price_usd_per_hour": price_usd_per_hour + zero, "power_w": power_w + zero,
            "cost_per_million_tokens_usd": cost_per_million_tokens_usd(price_usd_per_hour, rate),
            "tokens_per_j": tokens_per_j(rate, power_w)}


def add_costs(ds: xr.Dataset, *, prices: dict | None = None, power_w: dict | None = None) -> xr.Dataset:
    """Add price_usd_per_hour, power_w (per device), cost_per_million_tokens_usd and
    tokens_per_j, from output_tokens_per_s_per_device (the rate one device sustains)."""
    table = dict(catalog_prices(), **(prices or {}))
    price = _per_hardware(ds, table, "prices")
    names = np.atleast_1d(ds.hardware.values)
    power_table = {n: device_power_w(n) for n in names if n not in (power_w or {})}
    power = _per_hardware(ds, dict(power_table, **(power_w or {})), "power_w")
    rate = ds.output_tokens_per_s_per_device
    out = ds.assign(price_usd_per_hour=price, power_w=power,
                    cost_per_million_tokens_usd=cost_per_million_tokens_usd(price, rate),
                    tokens_per_j=tokens_per_j(rate, power))
    out["price_usd_per_hour"].attrs = {"units": "USD/h", "long_name": "price per device-hour"}
    out["power_w"].attrs = {"units": "W", "long_name": "power per device"}
    out["cost_per_million_tokens_usd"].attrs = {"units": "USD", "long_name": "cost per million output tokens"}
    out["tokens_per_j"].attrs = {"units": "tokens/J", "long_name": "output tokens per joule"}
    return out
