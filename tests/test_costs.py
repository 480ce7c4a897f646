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


def test_every_prediction_carries_its_cost_from_the_knobs():
    """predict.* adds the cost outputs per point from the hardware's price and power knobs:
    equal to add_costs with the catalog's numbers, linear in a swept price, and a target
    in dollars can be asked of the price (analysis.requirement)."""
    from workbench import analysis
    ds = predict.inference(hardware=["h100_sxm", "cs3"], model="llama_3_1_8b", batch=[1, 16], weights="fp16")
    ref = costs.add_costs(ds.drop_vars(["cost_per_million_tokens_usd", "tokens_per_j", "price_usd_per_hour",
                                        "power_w"]))
    assert np.allclose(ds.cost_per_million_tokens_usd, ref.cost_per_million_tokens_usd)
    assert np.allclose(ds.tokens_per_j, ref.tokens_per_j)
    swept = predict.inference(hardware="b200", model="llama_3_1_8b", batch=16,
                              hardware_overrides={"price_usd_per_hour": [3.0, 6.0], "tdp_w": [500.0, 1000.0]})
    c = swept.cost_per_million_tokens_usd
    assert float(c.sel(price_usd_per_hour=6.0, tdp_w=500.0)) == pytest.approx(2 * float(
        c.sel(price_usd_per_hour=3.0, tdp_w=500.0)))
    j = swept.tokens_per_j
    assert float(j.sel(price_usd_per_hour=3.0, tdp_w=500.0)) == pytest.approx(2 * float(
        j.sel(price_usd_per_hour=3.0, tdp_w=1000.0)))
    train = predict.training(hardware="h100_sxm", model="llama_3_1_8b", devices=8, dp=8)
    assert float(train.cost_per_million_tokens_usd) == pytest.approx(
        3.0 / 3600 / float(train.tokens_per_s_per_device) * 1e6)  # h100_sxm.yaml: $3.00 per GPU-hour
    req = analysis.requirement(predict.inference, metric="cost_per_million_tokens_usd", target=0.5,
                               knob="price_usd_per_hour", hardware="h100_sxm", model="llama_3_1_8b", batch=16)
    assert str(req.knob_helps.values) == "down"
    assert float(req.metric_at_required) == pytest.approx(0.5, rel=0.005)
