"""Each measure's minimum n (issue 40, item 2): below it an error, at it a value that depends on the data."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from interlingua.analysis.inference import bootstrap_interval, jackknife_interval
from interlingua.analysis.inference.intervals import BOOTSTRAP_MIN_N, bootstrap_min_n, jackknife_min_n
from interlingua.analysis.measures import MeasureWarning, get_measure
from interlingua.analysis.measures.base import MEASURES
from interlingua.core.errors import MeasureInputError


def _value(mid: str, x: np.ndarray, y: np.ndarray) -> float:
    m = get_measure(mid)
    kw = {"same_model": True} if m.metadata.requires_same_model else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return m(x, y, **kw)


@pytest.mark.parametrize("mid", MEASURES.names())
def test_below_min_n_is_refused_and_at_min_n_the_value_depends_on_the_data(mid: str) -> None:
    n = get_measure(mid).metadata.min_n
    rng = np.random.default_rng(0)
    if n > 2:
        with pytest.raises(MeasureInputError, match="at least"):
            _value(mid, rng.standard_normal((n - 1, 5)), rng.standard_normal((n - 1, 5)))
    values = {round(_value(mid, rng.standard_normal((n, 5)), rng.standard_normal((n, 5))), 9) for _ in range(12)}
    values.discard(math.nan)
    assert len({v for v in values if not math.isnan(v)}) > 1, (mid, n, values)


@pytest.mark.parametrize("mid", ["cka_linear_biased", "procrustes_resid2_centered_unitnorm"])
def test_n_equal_2_no_longer_scores_every_pair_one(mid: str) -> None:
    """Two centred rows are +-d/2 on each side: matched = shuffled = 1.000 for any data (the issue)."""
    rng = np.random.default_rng(1)
    with pytest.raises(MeasureInputError, match="every pair scores 1"):
        _value(mid, rng.standard_normal((2, 4)), rng.standard_normal((2, 4)))


def test_compare_at_n_2_says_so() -> None:
    import interlingua

    rng = np.random.default_rng(2)
    table = interlingua.compare(rng.standard_normal((2, 4)), rng.standard_normal((2, 4)), measures="cka_linear_biased")
    row = table.iloc[0]
    assert math.isnan(row["matched"]) and math.isnan(row["shuffled"])
    assert "at least 3" in row["note"] and "every pair scores 1" in row["note"]


def test_jackknife_at_n_3_is_refused() -> None:
    """Leave-one-out at n = 3 keeps two rows, where CKA is 1 whatever the data: a width-1e-15 interval."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    with pytest.raises(MeasureInputError, match="jackknife of cka_linear_biased needs at least 4"):
        jackknife_interval("cka_linear_biased", x, y, n_groups=3)
    x, y = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    ci = jackknife_interval("cka_linear_biased", x, y, n_groups=4)
    assert ci.high - ci.low > 1e-6


def test_bootstrap_below_its_minimum_is_refused() -> None:
    rng = np.random.default_rng(4)
    need = bootstrap_min_n(get_measure("cka_linear_biased").metadata.min_n)
    assert need == BOOTSTRAP_MIN_N
    x, y = rng.standard_normal((need - 1, 3)), rng.standard_normal((need - 1, 3))
    with pytest.raises(MeasureInputError, match=f"needs at least {need} rows"):
        bootstrap_interval("cka_linear_biased", x, y, n_boot=50)


@pytest.mark.slow
def test_bootstrap_never_scores_a_resample_with_too_few_distinct_rows() -> None:
    """A resample with fewer distinct rows than min_n is nan, never CKA's degenerate 1.0."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 3))
    y = rng.standard_normal((8, 3))
    ci = bootstrap_interval("cka_linear_biased", x, y, n_boot=4000, seed=1)
    draws = np.random.default_rng(1)
    for rep in ci.replicates:
        idx = draws.integers(0, 8, size=8)
        if np.unique(idx).size < 3:
            assert math.isnan(rep)
        else:
            assert math.isfinite(rep) and rep < 1 - 1e-9


def test_measures_json_states_every_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    from interlingua.cli import main

    assert main(["measures", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(MEASURES.names())
    for mid, row in rows.items():
        meta = get_measure(mid).metadata
        assert row["min_n"] == meta.min_n
        assert row["min_n_jackknife"] == jackknife_min_n(meta.min_n)
        assert row["min_n_bootstrap"] == bootstrap_min_n(meta.min_n)
    assert rows["cka_linear_biased"]["min_n"] == 3
    assert rows["mknn_k10"]["bootstrap_rows"] == "leave-one-out pseudo-values"
