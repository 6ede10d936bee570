"""Quality oracles: how close fast comes to the optimum, the estimators to the truth, and
the profile to a strong baseline, on fixed inputs, with thresholds a little below the
measured figures. A regression guard, not a timed test: a worse allocator, estimator or
profile fails here even when every plan stays legal.

The thresholds are the measured figures (docs/testing.md) minus a small margin; raise
them when a change improves the measurement, never lower them to let a change pass.
fast's own sit in `tests/quality_oracle.py`, which `tests/test_mutants.py` judges
weakened versions of fast by (they must fail).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from allocator import grid as gridlib
from allocator.policies import POLICIES
from allocator.quality import shares, summarize
from tests.quality_oracle import (
    milp_cases,
    quality_failures,
    tiny_cases,
)

ROOT = Path(__file__).resolve().parents[1]

def test_the_fixed_sets_are_what_the_thresholds_were_measured_on() -> None:
    cases = milp_cases()
    assert len(cases) == 46 and len({c.key for c in cases}) == 46
    assert all(c.optimum > 0 for c in cases)
    assert len(tiny_cases()) == 120 and all(best > 0 for _, best in tiny_cases())


def test_no_policy_beats_a_stored_optimum() -> None:
    """A share above 1 would mean a stored optimum is wrong (or a policy cheats); the optima
    are stored to 6 decimals, hence the tolerance."""
    for name in ("fast", "fifo", "priority"):
        assert max(shares(POLICIES[name], milp_cases())) <= 1 + 1e-7, name


def test_fast_comes_near_the_optimum() -> None:
    assert quality_failures(POLICIES["fast"]) == []


def test_fast_beats_the_better_baseline_by_a_margin() -> None:
    """The baselines are far below fast on these sets; fast is no mere fallback to them."""
    milp = summarize(shares(POLICIES["fast"], milp_cases()))
    for name in ("fifo", "priority"):
        base = summarize(shares(POLICIES[name], milp_cases()))
        assert milp.mean - base.mean >= 0.05, (name, base.mean)


@pytest.mark.slow
def test_a_stored_optimum_is_reproduced_by_the_milp() -> None:
    """Spot check of data/quality/optima.json: two quick scenarios solved again."""
    from allocator.policies.full import full

    cases = {c.key: c for c in milp_cases()}
    for key in ("1/mixed-control", "7/oversubscribed"):
        case = cases[key]
        result = full(case.scenario, time_limit=60.0)
        assert result.solve is not None and result.solve.status == "optimal"
        assert gridlib.objective(case.scenario, result.grid) == pytest.approx(case.optimum,
                                                                              rel=1e-5)


# -- the estimators against their baselines (the docs/estimators.md evaluation) -----------

TRAINING_MDAPE_MAX = 0.150          # measured 0.145
TRAINING_VS_POWER_LAW_MIN = 6.0     # measured 6.4x (baseline MdAPE / ours)
TRAINING_P90_COVERAGE = (0.88, 0.93)  # measured 0.907
TRAINING_GPU_ACC_MIN = 0.93         # measured 0.936 (the formula alone: 0.933)
QUANT_MDAPE_MAX = 0.195             # measured 0.188
QUANT_UNDER_RATE_MAX = 0.035        # measured 0.030


@pytest.fixture(scope="module")
def estimator_report():
    from forecasting.evaluate import evaluate
    from forecasting.history import load_quant_history, load_training_history
    from forecasting.synth import noise_floor_mdape

    history = ROOT / "data" / "history"
    return evaluate(load_training_history(history / "training.csv"),
                    load_quant_history(history / "quantization.csv"),
                    test_fraction=0.25, seed=0, noise_floor=noise_floor_mdape(0.2))


@pytest.mark.slow
def test_training_estimator_against_the_size_only_power_law(estimator_report) -> None:
    overall = estimator_report.training.set_index("variant").loc["overall"]
    assert overall["mdape"] <= TRAINING_MDAPE_MAX
    assert overall["base_mdape"] / overall["mdape"] >= TRAINING_VS_POWER_LAW_MIN
    assert TRAINING_P90_COVERAGE[0] <= overall["p90_coverage"] <= TRAINING_P90_COVERAGE[1]
    assert overall["gpu_acc"] >= TRAINING_GPU_ACC_MIN
    assert overall["gpu_acc"] > overall["base_gpu_acc"]


@pytest.mark.slow
def test_quantization_estimator_on_held_out_jobs(estimator_report) -> None:
    overall = estimator_report.quantization.set_index("algorithm").loc["overall"]
    assert overall["mdape"] <= QUANT_MDAPE_MAX
    assert overall["under_rate"] <= QUANT_UNDER_RATE_MAX


# -- the realtime profile against the seasonal maximum (the ServeGen week) -----------------

# GPU-hours the profile holds / GPU-hours the seasonal maximum needs to be short no more
# often than the profile (its headroom raised in steps of 5% until it is).
# measured 0.874 (0.853 before the profile's count floor and Mann-Kendall trend gate, which
# trade a little on these smooth pools for robustness on sparse, bursty services)
PROFILE_VS_SEASONAL_MAX_TOTAL = 0.89
PROFILE_VS_SEASONAL_MAX_WORST = 0.98   # measured 0.965 (m-mid)
PROFILE_SHORTFALL_MAX_PCT = 1.0        # measured 0.93 (m-large; 0.70 before the same change):
#                                        the pooled target of docs/profile.md, 1%


def test_profile_holds_fewer_gpu_hours_than_the_seasonal_maximum() -> None:
    from benchmarks import profile_eval as ev
    from forecasting.baselines import matched_seasonal_max
    from forecasting.profile import DemandProfile
    from forecasting.traffic import hourly, load_services, load_traffic

    configs = load_services(ROOT / "data" / "traffic" / "services.json")
    wide = hourly(load_traffic(ROOT / "data" / "traffic" / "servegen_traffic.csv"))
    table = ev.metrics(ev.replay(wide, configs, model=DemandProfile(quantile=0.95)), 0.95)
    profile = table[table["method"] == "profile"].set_index("service")
    shortfall = profile["shortfall_pct"].to_dict()
    baseline = {s: h.gpu_hours for s, h in matched_seasonal_max(wide, configs, shortfall).items()}
    assert set(baseline) == set(shortfall), "the seasonal maximum never matched a shortfall"
    ratios = {s: profile.loc[s, "gpu_hours_held"] / baseline[s] for s in baseline}
    total = profile["gpu_hours_held"].sum() / sum(baseline.values())
    assert total <= PROFILE_VS_SEASONAL_MAX_TOTAL, (total, ratios)
    assert max(ratios.values()) <= PROFILE_VS_SEASONAL_MAX_WORST, ratios
    assert max(shortfall.values()) <= PROFILE_SHORTFALL_MAX_PCT, shortfall
