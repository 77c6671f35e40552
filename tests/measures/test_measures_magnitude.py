"""Every registered measure across input magnitudes 1e-300 ... 1e300 (issue 40, item 2).

Tolerance: ``X * s`` rounds each entry to within a relative 2^-53 (~1.1e-16) of the exact ``s X``; the
measures rescale by exact powers of two, so what remains is that input rounding times the measure's
condition on these well-conditioned Gaussians (at most ~1e3: sums over n x width terms), i.e. ~1e-13.
Rank-based measures (kNN, RSA) are unchanged unless two similarities lie within ~1e-13, which random
Gaussians do not. ``TOL = 1e-9`` leaves four orders of magnitude of margin and still catches every
failure the issue reports (errors of 0.08 and more).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from interlingua.analysis.measures import MeasureWarning, get_measure
from interlingua.analysis.measures.base import MEASURES
from interlingua.core.errors import MeasureInputError

TOL = 1e-9
SCALES = (1e-300, 1e-150, 1e-10, 1.0, 1e10, 1e150, 1e300)
#: the reasons a value may be nan for constant or duplicated inputs; never true of these distinct rows
FALSE_REASONS = ("duplicated", "constant", "zero after centring", "identical", "no variance")


def _pair(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p))
    y = x @ rng.standard_normal((p, p)) * 0.5 + rng.standard_normal((n, p))
    return x, y


SHAPES = {"24x12": _pair(24, 12, 0), "16x40": _pair(16, 40, 1)}


def _compute(mid: str, x: np.ndarray, y: np.ndarray):
    m = get_measure(mid)
    kw = {"same_model": True} if m.metadata.requires_same_model else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return m.compute(x, y, **kw)


def _ids() -> list[str]:
    return MEASURES.names()


def test_the_issue_figures_are_fixed() -> None:
    """The reproducer of issue 40 (24 x 12 Gaussians): SVCCA 0.888, Procrustes 0.500, ANC 0 / 1 at 1e+-300."""
    x, y = SHAPES["24x12"]
    for mid, truth in (("svcca_var0.99", 0.810), ("procrustes_resid2_centered_unitnorm", 0.790), ("anc_abs", 0.211)):
        for s in (1e-300, 1e300):
            assert _compute(mid, x * s, y).value == pytest.approx(truth, abs=5e-4), (mid, s)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("mid", _ids())
def test_magnitude_sweep(mid: str, shape: str) -> None:
    x, y = SHAPES[shape]
    meta = get_measure(mid).metadata
    try:
        ref = _compute(mid, x, y)
    except MeasureInputError:
        pytest.skip(f"{mid} refuses the {shape} shape at s = 1 (e.g. k too large for n)")
    assert math.isfinite(ref.value), (mid, ref.details.get("reason"))
    for s in SCALES:
        for side, (a, b) in (("X", (x * s, y)), ("Y", (x, y * s))):
            r = _compute(mid, a, b)
            if "isotropic_scale" in meta.invariances:
                assert r.value == pytest.approx(ref.value, abs=TOL), (mid, shape, side, s, r.details.get("reason"))
            else:  # no invariance promised: a finite value, or nan with a reason
                assert math.isfinite(r.value) or r.details.get("reason"), (mid, shape, side, s)


@pytest.mark.parametrize("mid", _ids())
def test_one_huge_entry_gives_the_limit_or_a_true_reason(mid: str) -> None:
    """One entry of 1e300 in an ordinary X (issue: CCA 0.860 instead of the true value, false nan reasons).

    The value at 1e300 must be the limit of the values as that entry grows, checked at 1e12 where float64
    holds every term (the corrections are O(1/B) ~ 1e-12, so the two agree to 1e-6), or nan / an error whose
    reason is not a claim about constant or duplicated rows (every row here is distinct and non-zero).
    """
    x, y = SHAPES["24x12"]
    big, ordinary = x.copy(), x.copy()
    big[0, 0], ordinary[0, 0] = 1e300, 1e12
    try:
        r = _compute(mid, big, y)
    except MeasureInputError as exc:
        assert not any(w in str(exc) for w in FALSE_REASONS), str(exc)
        return
    if math.isnan(r.value):
        reason = str(r.details.get("reason", ""))
        assert reason and not any(w in reason for w in FALSE_REASONS), reason
        return
    ref = _compute(mid, ordinary, y)
    assert r.value == pytest.approx(ref.value, abs=1e-6), (mid, r.value, ref.value)


def test_cca_with_one_huge_entry_uses_the_full_column_space() -> None:
    """Below the wide limit CCA is invariant to scaling one column, so 1e300 in one entry has a finite limit
    (the raw-column SVD saw rank 1 and returned 0.86-like values before)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 8))
    y = x @ rng.standard_normal((8, 6)) * 0.5 + rng.standard_normal((40, 6))
    big, mid_ = x.copy(), x.copy()
    big[0, 0], mid_[0, 0] = 1e300, 1e12
    for m in ("cca_mean", "cca_mean_sq", "pwcca_x", "pwcca_y"):
        got = _compute(m, big, y)
        assert got.value == pytest.approx(_compute(m, mid_, y).value, abs=1e-6), m
        assert got.details["rank_x"] == 8, m


def test_compare_table_is_the_same_at_every_magnitude() -> None:
    """The whole table (matched, shuffled control, permutation p through the prepared / Gram paths, jackknife)
    of ``interlingua.compare(X * s, Y)`` equals the unscaled one (the issue: p = 0.048 on a broken value)."""
    import interlingua

    x, y = SHAPES["24x12"]
    ids = _ids()
    cols = ["matched", "shuffled", "p_value", "jackknife_low", "jackknife_high"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        base = interlingua.compare(
            x, y, measures=ids, inference={"permutations": 20, "jackknife_groups": 6}, same_model=True
        )
        for s in (1e-300, 1e300):
            t = interlingua.compare(
                x * s, y, measures=ids, inference={"permutations": 20, "jackknife_groups": 6}, same_model=True
            )
            for c in cols:
                a, b = t[c].to_numpy(float), base[c].to_numpy(float)
                assert np.array_equal(np.isnan(a), np.isnan(b)), (s, c)
                assert np.nanmax(np.abs(a - b)) <= TOL, (s, c)


def test_cka_grid_is_the_same_at_every_magnitude() -> None:
    x, y = SHAPES["24x12"]
    layers = np.stack([x, 2 * x + 1, y])
    for mid in ("cka_linear_biased", "cka_linear_debiased"):
        m = get_measure(mid)
        for method in ("gram", "feature"):
            ref = m.grid(layers, layers, method=method)
            assert np.abs(m.grid(layers * 1e300, layers * 1e-300, method=method) - ref).max() <= TOL
