"""The plan's advice aims at its costliest phase, and the load at calibration is read and said (issue 36: the
advice said "fewer sentences" when fusion and barriers were 26 of 27.8 h; plan said nothing of load 7-10)."""

from __future__ import annotations

import os

import pytest

from interlingua.pipeline import cost
from interlingua.pipeline.cost import CostEstimate, MachineLoad, Phase


def _est(**seconds: float) -> CostEstimate:
    names = {
        "startup": "startup, pre-flight, stored entries",
        "extraction": "extraction",
        "comparisons": "comparisons",
        "fusion": "fusion",
        "barriers": "audits, quality, weights, barriers",
        "outputs": "outputs (tables, report, figures)",
    }
    phases = [Phase(names[k], tasks=1, seconds=v) for k, v in seconds.items()]
    return CostEstimate({}, phases, {"float32": 1e9, "float64": 1e9}, {})


def test_advice_targets_fusion_and_barriers_when_they_dominate() -> None:
    # the convergence study's shape: 26 of 27.8 h in fusion and barriers
    est = _est(startup=5, extraction=0.5 * 3600, comparisons=1.3 * 3600, fusion=14 * 3600, barriers=12 * 3600)
    ideas = cost.advice(est)
    assert [i.split(" (")[0] for i in ideas] == ["fusion", "audits, quality, weights, barriers"]
    text = " | ".join(ideas)
    assert "transport.alphas" in text and "barriers.grid" in text
    assert "corpus.n" not in text and "permutations" not in text  # the cheap phases' levers are not offered
    assert "fusion (14.0 h, 50%)" in ideas[0]


def test_advice_targets_the_comparisons_and_names_the_costliest_measures() -> None:
    est = _est(startup=5, extraction=60, comparisons=3000)
    est.phase("comparisons").parts = {"cka_linear_biased": 500.0, "rsa_spearman_corr": 2500.0}
    (idea,) = cost.advice(est)
    assert idea.startswith("comparisons (50.0 min, 98%)")
    assert "inference.permutations" in idea and "most costly: rsa_spearman_corr 41.7 min, cka_linear_biased" in idea


def test_advice_for_extraction_only_when_it_costs() -> None:
    (idea,) = cost.advice(_est(startup=5, extraction=5000, comparisons=100))
    assert idea.startswith("extraction") and "corpus.n" in idea and "cuda" in idea
    warning = cost.long_run_warning(_est(extraction=5000), None, threshold=60)
    assert warning is not None and "extraction" in warning
    assert cost.long_run_warning(_est(extraction=5000), None, threshold=6000) is None


@pytest.mark.parametrize(
    "load, cores, share",
    [(0.0, 2, 1.0), (1.0, 2, 1.0), (7.2, 2, 2 / 8.2), (3.0, 16, 1.0), (31.0, 16, 0.5)],
)
def test_the_load_share_is_the_cores_split_among_runnable_threads(monkeypatch, load, cores, share) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    read = cost.machine_load()
    assert read == MachineLoad(load, cores)
    assert read.share == pytest.approx(share)


def test_a_busy_machine_is_said_and_scales_the_estimate(monkeypatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (7.2, 7.0, 6.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    est = _est(startup=5, extraction=100, comparisons=50)
    idle = est.seconds
    cost.apply_load(est, cost.machine_load())
    assert est.seconds == pytest.approx(idle * 8.2 / 2)  # every phase divided by the share, 2 / 8.2
    text = "\n".join(cost.format_plan(est))
    assert "machine busy: load 7.2 on 2 core(s)" in text and "24% of each core" in text


def test_an_idle_machine_leaves_the_estimate_and_says_so(monkeypatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    est = _est(startup=5, extraction=100)
    cost.apply_load(est, cost.machine_load())
    assert est.seconds == 105
    assert "machine idle enough: load 0.3 on 2 core(s)" in "\n".join(cost.format_plan(est))


def test_no_load_average_gives_none(monkeypatch) -> None:
    def absent() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", absent)
    assert cost.machine_load() is None
    est = _est(extraction=10)
    assert cost.apply_load(est, None).seconds == 10


def test_the_nominal_machine_replaces_the_calibration(monkeypatch) -> None:
    def never(*_a: object) -> float:
        raise AssertionError("calibrated under nominal_machine()")

    monkeypatch.setattr(cost, "matmul_rate", never)
    monkeypatch.setattr(cost, "measure_overheads", never)
    with cost.nominal_machine():
        assert cost._rates() == (cost.NOMINAL_RATES["float32"], cost.NOMINAL_RATES["float64"])
        assert cost._overheads("cka_linear_biased") == cost.NOMINAL_OVERHEADS
        assert "nominal machine, not calibrated here" in cost.format_plan(_est(extraction=1))[0]
    with pytest.raises(AssertionError, match="calibrated"):
        cost._rates()
