"""Facts about calibrated scores (interlingua.analysis.inference.calibration).

- the order statistic and the score formulas on hand-checked values;
- under independence the calibrated score is 0 in at least 1 - alpha of draws (exactly: a permutation
  test's level), over widths 8..1024 and three spectra;
- a planted shared signal gives a calibrated score that rises with the signal;
- the max-over-grid null dominates every cell's, draw by draw, so its tau is at least every cell's;
- calibrated scores are invariant to what the measure is invariant to (same permutations);
- the analytic (moments) tau of biased linear CKA lies within the Monte-Carlo null's quantile band;
- the columns are always present, NaN with a reason when there is no null.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import interlingua
from interlingua.analysis.inference import (
    calibrate,
    calibrate_grid,
    calibrate_grid_result,
    calibrate_result,
    calibrated_score,
    critical_value,
    grid_permutation_test,
    permutation_test,
)
from interlingua.analysis.inference.calibration import order_statistic_index
from interlingua.analysis.measures import get_measure
from interlingua.core.errors import MeasureInputError


def test_order_statistic_on_hand_checked_values() -> None:
    # K = 19, alpha = 0.05: position ceil(0.95 * 20) = 19 of 20, i.e. the second largest
    null = np.arange(19.0)  # 0..18
    assert order_statistic_index(19, 0.05) == 18
    assert critical_value(100.0, null, 0.05) == 18.0  # sorted: 0..18, 100 -> the 19th is 18
    assert critical_value(-1.0, null, 0.05) == 17.0  # sorted: -1, 0..18 -> the 19th is 17
    # K = 9, alpha = 0.05: ceil(9.5) = 10 -> the largest of the 10 values, observed included
    assert critical_value(3.5, np.arange(9.0), 0.05) == 8.0
    assert critical_value(30.0, np.arange(9.0), 0.05) == 30.0  # then nothing exceeds tau: score 0
    # a distance: the mirrored order statistic (alpha from below)
    assert critical_value(100.0, null, 0.05, larger_is_more_similar=False) == 1.0


def test_score_formulas() -> None:
    assert calibrated_score(0.6, 0.2, (0.0, 1.0)) == pytest.approx(0.5)  # (0.6 - 0.2) / (1 - 0.2)
    assert calibrated_score(0.1, 0.2, (0.0, 1.0)) == 0.0
    assert calibrated_score(0.6, 0.2) == pytest.approx(0.4)  # unbounded: the excess
    assert calibrated_score(-3.0, -1.0) == 0.0
    assert calibrated_score(0.2, 0.5, (0.0, 1.0), larger_is_more_similar=False) == pytest.approx(0.6)
    assert math.isnan(calibrated_score(math.nan, 0.2, (0.0, 1.0)))
    c = calibrate(0.9, np.linspace(0.0, 0.5, 19), bounds=(0.0, 1.0))
    assert c.tau == pytest.approx(0.5) and c.p_value == pytest.approx(1 / 20)
    assert c.calibrated == pytest.approx((0.9 - 0.5) / 0.5)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, "x", math.nan])
def test_alpha_outside_the_unit_interval_is_refused(bad: object) -> None:
    with pytest.raises(MeasureInputError, match="alpha"):
        calibrate(0.5, np.zeros(10), alpha=bad)  # type: ignore[arg-type]


def test_empty_null_is_refused() -> None:
    with pytest.raises(MeasureInputError, match="at least one draw"):
        calibrate(0.5, np.array([]))


def _spectrum(kind: str, p: int) -> np.ndarray:
    k = np.arange(1, p + 1, dtype=float)
    return {"flat": np.ones(p), "sqrt": k**-0.5, "power1": k**-1.0}[kind]


@pytest.mark.parametrize("spectrum", ["flat", "sqrt", "power1"])
@pytest.mark.parametrize("width", [8, 64, 256, 1024])
def test_zero_under_independence_in_at_least_1_minus_alpha_of_draws(width: int, spectrum: str) -> None:
    """P(calibrated > 0) = P(s > tau) <= floor(alpha (K + 1)) / (K + 1) for exchangeable rows: check by counting."""
    rng = np.random.default_rng(width + len(spectrum))
    reps, n, k, alpha = 120, 24, 19, 0.05
    scale = _spectrum(spectrum, width)
    positive = 0
    for r in range(reps):
        x = rng.standard_normal((n, width)) * scale
        y = rng.standard_normal((n, width)) * scale
        res = permutation_test("cka_linear_biased", x, y, n_permutations=k, seed=r)
        positive += calibrate_result(res, alpha=alpha).calibrated > 0
    level = math.floor(alpha * (k + 1)) / (k + 1)
    # one-sided binomial bound at 1e-3: fails only if the rate of positives exceeds the level
    assert positive <= stats.binom.ppf(0.999, reps, level)


def test_calibrated_score_rises_with_a_planted_signal() -> None:
    signals = [0.0, 0.15, 0.3, 0.6, 1.2]
    means = []
    for s in signals:
        vals = []
        for r in range(6):
            rng = np.random.default_rng(r)
            z = rng.standard_normal((60, 5))
            x = np.hstack([z, rng.standard_normal((60, 20))])
            y = np.hstack([s * z @ rng.standard_normal((5, 5)), rng.standard_normal((60, 20))])
            res = permutation_test("cka_linear_biased", x, y, n_permutations=99, seed=r)
            vals.append(calibrate_result(res).calibrated)
        means.append(float(np.mean(vals)))
    assert means[0] < 0.02
    assert all(b > a for a, b in zip(means, means[1:])), means
    assert means[-1] > 0.2


def test_grid_max_null_dominates_every_cell() -> None:
    rng = np.random.default_rng(0)
    a = [rng.standard_normal((30, 6)) for _ in range(3)]
    b = [rng.standard_normal((30, 5)) for _ in range(4)]
    res = grid_permutation_test(a, b, n_permutations=99, seed=2)
    assert res.cell_null is not None
    assert np.array_equal(res.null, res.cell_null.max(axis=(1, 2)))  # the test's max null is the kept grids' max
    cal = calibrate_grid_result(res)
    assert np.all(cal.maximum.tau >= cal.cell_tau - 1e-15)
    for i in range(3):
        assert np.all(cal.best_b[i].tau >= cal.cell_tau[i] - 1e-15)
        assert cal.best_b[i].tau <= cal.maximum.tau + 1e-15
    for j in range(4):
        assert np.all(cal.best_a[j].tau >= cal.cell_tau[:, j] - 1e-15)
    assert cal.mean.tau <= cal.maximum.tau
    # the grid test's p-value is the calibrated maximum's
    assert cal.maximum.p_value == pytest.approx(res.p_value)
    # stochastically larger, strictly: the max null's median exceeds every cell null's median
    assert np.median(res.null) > np.median(res.cell_null, axis=0).max()


def test_grid_calibration_ignores_undefined_cells() -> None:
    grid = np.array([[0.5, np.nan], [0.2, 0.1]])
    null = np.random.default_rng(0).uniform(0, 0.3, size=(19, 2, 2))
    null[:, 0, 1] = np.nan
    cal = calibrate_grid(grid, null, bounds=(0.0, 1.0))
    assert cal.argmax == (0, 0) and cal.maximum.observed == 0.5
    assert math.isnan(cal.cell_tau[0, 1]) and math.isnan(cal.cell_calibrated[0, 1])
    assert cal.mean.observed == pytest.approx((0.5 + 0.2 + 0.1) / 3)
    assert list(cal.best_b_index) == [0, 0] and list(cal.best_a_index) == [0, 1]


def _transform(kind: str, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    p = x.shape[1]
    if kind == "orthogonal":
        q, _ = np.linalg.qr(rng.standard_normal((p, p)))
        return x @ q
    if kind == "isotropic_scale":
        return 3.7 * x
    if kind == "translation":
        return x + rng.standard_normal(p)
    if kind == "permutation":
        return x[:, rng.permutation(p)]
    if kind == "invertible_linear":
        return x @ (np.eye(p) + 0.3 * rng.standard_normal((p, p)))
    raise AssertionError(kind)


MEASURES = ["cka_linear_biased", "cka_linear_debiased", "cca_mean", "mknn_k10", "rsa_spearman_cosine"]


@pytest.mark.parametrize("measure_id", MEASURES)
def test_calibrated_score_is_invariant_to_what_the_measure_is_invariant_to(measure_id: str) -> None:
    rng = np.random.default_rng(4)
    z = rng.standard_normal((40, 3))
    x = np.hstack([z, rng.standard_normal((40, 5))])
    y = np.hstack([0.7 * z + rng.standard_normal((40, 3)), rng.standard_normal((40, 3))])
    base = calibrate_result(permutation_test(measure_id, x, y, n_permutations=49, seed=1))
    assert base.calibrated > 0  # a non-trivial value to compare
    for kind in sorted(get_measure(measure_id).metadata.invariances):
        xt, yt = _transform(kind, x, rng), _transform(kind, y, rng)
        other = calibrate_result(permutation_test(measure_id, xt, yt, n_permutations=49, seed=1))
        assert other.tau == pytest.approx(base.tau, abs=1e-9), kind
        assert other.calibrated == pytest.approx(base.calibrated, abs=1e-9), kind


def test_moments_tau_lies_in_the_monte_carlo_quantile_band() -> None:
    """The Pearson III (1 - alpha) quantile of biased linear CKA vs 4,000 draws of the same null.

    Band: +-0.015 in probability around 0.95, more than 4 Monte-Carlo standard errors.
    """
    rng = np.random.default_rng(9)
    for n, p, q in [(80, 10, 30), (150, 40, 8)]:
        x = rng.standard_normal((n, p)) * _spectrum("sqrt", p)
        y = 0.2 * x[:, :1] @ rng.standard_normal((1, q)) + rng.standard_normal((n, q))
        alpha = 0.05
        mom = permutation_test("cka_linear_biased", x, y, null_method="moments", quantiles=(1 - alpha,))
        mc = permutation_test("cka_linear_biased", x, y, n_permutations=4_000, seed=0)
        c_mom, c_mc = calibrate_result(mom, alpha=alpha), calibrate_result(mc, alpha=alpha)
        low, high = np.quantile(mc.null, [0.935, 0.965])
        assert low <= c_mom.tau <= high, (n, c_mom.tau, low, high)
        assert c_mom.method == "moments" and c_mom.n_permutations == 0
        assert c_mom.calibrated == pytest.approx(c_mc.calibrated, abs=0.01)


def test_moments_result_without_the_quantile_is_refused() -> None:
    x = np.random.default_rng(0).standard_normal((20, 4))
    res = permutation_test("cka_linear_biased", x, x[::-1], null_method="moments")
    with pytest.raises(MeasureInputError, match="0.98"):
        calibrate_result(res, alpha=0.02)


def test_compare_table_always_has_the_columns() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((30, 6)), rng.standard_normal((30, 6))
    with_null = interlingua.compare(
        x, y, measures=["cka_linear_biased", "cka_linear_debiased"], inference={"permutations": 19}
    )
    assert {"tau", "calibrated"} <= set(with_null.columns)
    assert with_null["tau"].notna().all()
    assert (with_null["calibrated"] >= 0).all()
    without = interlingua.compare(x, y, inference={"permutations": 0})
    assert {"tau", "calibrated"} <= set(without.columns)
    assert without["calibrated"].isna().all()
    assert without["note"].str.contains("no permutation null").all()
    with pytest.raises(MeasureInputError, match="alpha"):
        interlingua.compare(x, y, inference={"permutations": 19, "alpha": 1.5})


def _spec(**over: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "output": "x",
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"zoo": "eng"}],
        "inference": {"permutations": 0},
    }
    spec.update(over)
    return spec


def test_questions_that_read_calibrated_scores_need_a_null() -> None:
    from interlingua.core.errors import ConfigError
    from interlingua.pipeline.config import parse_spec

    with pytest.raises(ConfigError, match="predictors.columns reads `calibrated`"):
        parse_spec(_spec(predictors={"predictors": ["length_control"]}))
    parse_spec(_spec(predictors={"predictors": ["length_control"], "columns": ["matched"]}))  # raw: fine
    sweep = [{"name": f"m{a}", "zoo": "eng", "sweep": "s", "sweep_values": {"alpha": a}} for a in (0.25, 0.5, 0.75)]
    with pytest.raises(ConfigError, match="inference.score: raw"):
        parse_spec(_spec(models=sweep))
    parse_spec(_spec(models=sweep, inference={"permutations": 0, "score": "raw"}))
    spec = parse_spec(_spec(models=sweep, inference={"permutations": 10}))
    assert spec.inference.score == "calibrated" and spec.inference.alpha == 0.05


def test_protocol_worked_example_prints_what_the_page_shows() -> None:
    """docs/protocol.md, "Calibrated scores": the python block's output is the text block after it."""
    import contextlib
    import io
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = page[page.index("### Calibrated scores") :]
    match = re.search(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, flags=re.DOTALL)
    assert match is not None
    code, shown = match.groups()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "protocol.md[calibration]", "exec"), {})  # noqa: S102 - our own docs
    assert out.getvalue() == shown


def test_report_headline_leads_with_the_calibrated_score_and_says_so() -> None:
    from interlingua.comparison.report import _headline, _shown
    from interlingua.core.schema import result_table
    from interlingua.pipeline.report import declared_columns
    from interlingua.report.glossary import describe

    rows = [
        {
            "pair": f"m:eng|m:{lang}",
            "kind": "within_model",
            "pooling": "mean",
            "measure": "cka_linear_biased",
            "layer_a": 2,
            "layer_b": 2,
            "matched": 0.5 + i / 10,
            "shuffled": 0.1,
            "tau": 0.3,
            "calibrated": cal,
        }
        for i, (lang, cal) in enumerate([("deu", 0.0), ("spa", 0.25), ("rus", 0.5)])
    ]
    table = result_table(rows)
    text = " ".join(_headline(table, table, "cka_linear_biased", "mean", 0.05, "calibrated"))
    assert "calibrated 0.000–0.500 (median 0.250), above chance (> 0 at alpha = 0.05) in 2/3" in text
    assert text.index("calibrated") < text.index("matched")
    raw = " ".join(_headline(table, table, "cka_linear_biased", "mean", 0.05, "raw"))
    assert "calibrated" not in raw
    assert "`calibrated` score first" in _shown({"inference": {"permutations": 100, "alpha": 0.05}})
    assert "raw `matched`" in _shown({"inference": {"permutations": 0}})
    assert "raw `matched`" in _shown({"inference": {"permutations": 100, "score": "raw"}})
    for name in ("tau", "calibrated", "calibrated_grid_max", "calibrated_best_b"):
        assert describe(name, ["results"], declared_columns()), name


def test_a_plain_callable_is_unbounded_unless_told() -> None:
    def first_column_r(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.corrcoef(a[:, 0], b[:, 0])[0, 1])

    x = np.random.default_rng(0).standard_normal((30, 3))
    res = permutation_test(first_column_r, x, x + 0.1, n_permutations=19, seed=0)
    excess = calibrate_result(res)
    assert not excess.bounded and excess.calibrated == pytest.approx(res.observed - excess.tau)
    scaled = calibrate_result(res, bounds=(-1.0, 1.0))
    assert scaled.bounded and scaled.calibrated == pytest.approx((res.observed - scaled.tau) / (1 - scaled.tau))
