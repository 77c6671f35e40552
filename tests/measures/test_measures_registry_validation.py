"""The public API, the id registry and the shared input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import interlingua.analysis.measures as M
from interlingua.analysis.measures import MeasureMetadata, get_measure, list_measures
from interlingua.core.errors import InterlinguaError, MeasureInputError

FUNCTIONS = {
    "linear_cka": M.linear_cka,
    "rbf_cka": M.rbf_cka,
    "cca": M.cca,
    "svcca": M.svcca,
    "pwcca": M.pwcca,
    "procrustes": M.procrustes,
    "mutual_knn": M.mutual_knn,
    "rsa": M.rsa,
}


def test_public_api_and_ids() -> None:
    for name in ("get_measure", "list_measures", "cka_grid", "anc", "mutual_knn_chance", "gram_linear", "center_gram"):
        assert callable(getattr(M, name))
    ids = list_measures()
    for mid in (
        "cka_linear_biased",
        "cka_linear_debiased",
        "cka_rbf_median1.0",
        "svcca_var0.99",
        "pwcca_x",
        "pwcca_y",
        "anc_abs",
        "anc_signed",
        "mknn_k10",
        "rsa_spearman_corr",
        "procrustes_resid2_centered_unitnorm",
    ):
        assert mid in ids
        assert get_measure(mid).id == mid
    assert len(set(ids)) == len(ids)


def test_unknown_id_and_fixed_parameters() -> None:
    with pytest.raises(MeasureInputError, match="unknown measure id 'cka_cosine'.*cka_linear_biased.*mknn_k<k>"):
        get_measure("cka_cosine")
    x = np.random.default_rng(0).standard_normal((20, 3))
    with pytest.raises(MeasureInputError, match="fixed by the measure id"):
        get_measure("cka_linear_biased")(x, x, debiased=True)
    # options that do not change what is measured pass through
    assert get_measure("cka_linear_biased")(x, x, method="feature", backend="torch") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown invariance"):
        MeasureMetadata(True, True, frozenset({"affine"}))


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_non_finite_inputs_name_the_side_and_count(name: str) -> None:
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((30, 4)), rng.standard_normal((30, 4))
    y[3, 1], y[7, 2], y[9, 0] = np.nan, np.inf, -np.inf
    with pytest.raises(MeasureInputError, match=r"Y contains 3 non-finite value\(s\) \(1 NaN, 2 inf\)"):
        FUNCTIONS[name](x, y)
    with pytest.raises(MeasureInputError, match=r"X contains 3 non-finite"):
        FUNCTIONS[name](y, x)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_shape_errors(name: str) -> None:
    rng = np.random.default_rng(2)
    fn = FUNCTIONS[name]
    with pytest.raises(MeasureInputError, match="X has 30 rows but Y has 29"):
        fn(rng.standard_normal((30, 4)), rng.standard_normal((29, 4)))
    with pytest.raises(MeasureInputError, match="expected a 2-D"):
        fn(rng.standard_normal(30), rng.standard_normal((30, 4)))
    with pytest.raises(MeasureInputError, match="expected a 2-D"):
        fn(rng.standard_normal((30, 4)), rng.standard_normal((2, 30, 4)))
    with pytest.raises(MeasureInputError):
        fn(np.array([["a", "b"]] * 30), rng.standard_normal((30, 4)))


def test_errors_are_interlingua_errors_and_torch_inputs_are_checked_too() -> None:
    assert issubclass(MeasureInputError, InterlinguaError)
    x = torch.randn(20, 3, dtype=torch.float64)
    x[0, 0] = float("nan")
    with pytest.raises(MeasureInputError, match="X contains 1 non-finite"):
        M.linear_cka(x, torch.randn(20, 3), backend="torch")
    with pytest.raises(MeasureInputError, match="X contains 1 non-finite"):
        M.svcca(x, torch.randn(20, 3))
    with pytest.raises(MeasureInputError, match="backend must be one of"):
        M.linear_cka(x, x, backend="jax")
    with pytest.raises(MeasureInputError, match="needs backend='torch'"):
        M.linear_cka(torch.randn(20, 3), torch.randn(20, 3), device="cuda")


def test_half_precision_tensors_are_accepted() -> None:
    x = torch.randn(20, 5).to(torch.bfloat16)
    assert M.linear_cka(x, x) == pytest.approx(1.0)
    assert M.procrustes(x.half(), x.half()) == pytest.approx(1.0)
