"""Cost axes: arithmetic against closed forms and overrides."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import costs, predict
from workbench.errors import InputError


def test_cost_and_energy_closed_form():
    ds = costs.add_costs(predict.inference(hardware=["h100_sxm", "cs3"], model="llama_3_1_8b", batch=[1, 16],
                                           weights="fp16"))
    rate = ds.output_tokens_per_s_per_device
    # $/h / 3600 s/h / (tokens/s) * 1e6 = $ per million tokens
    expected = ds.price_usd_per_hour / 3600.0 / rate * 1e6
    assert np.allclose(ds.cost_per_million_tokens_usd, expected)
    assert float(ds.power_w.sel(hardware="h100_sxm")) == 700.0  # H100 SXM TDP (datasheet)
    assert float(ds.power_w.sel(hardware="cs3")) == 23000.0  # CS-3 system power (Kundu Table 1)
    assert np.allclose(ds.tokens_per_j, rate / ds.power_w)
    assert ds.cost_per_million_tokens_usd.attrs["units"] == "USD"


def test_overrides_and_scalar_hardware():
    base = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=8)
    a = costs.add_costs(base)
    b = costs.add_costs(base, prices={"h100_sxm": 6.0}, power_w={"h100_sxm": 1400.0})
    assert float(b.cost_per_million_tokens_usd) == pytest.approx(2 * float(a.cost_per_million_tokens_usd))
    assert float(b.tokens_per_j) == pytest.approx(float(a.tokens_per_j) / 2)


def test_unknown_price_is_a_clear_error():
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b").drop_vars("hardware")
    with pytest.raises(InputError, match="hardware"):
        costs.add_costs(ds)
