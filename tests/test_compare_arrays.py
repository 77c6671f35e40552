"""interlingua.compare(X, Y, ...): the values of direct measure / inference calls, the pipeline's row for the
same inputs, and MeasureInputError for unusable input."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import interlingua
from interlingua.analysis.inference import jackknife_interval, pair_seed, permutation_test, shuffle_permutation
from interlingua.analysis.inference.config import InferenceSpec
from interlingua.analysis.measures import get_measure
from interlingua.core.errors import MeasureInputError

N, K, SEED = 40, 99, 3
MEASURES = ["cka_linear_debiased", "procrustes_resid2_centered_unitnorm", "rsa_spearman_corr"]


@pytest.fixture(scope="module")
def xy() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    x = rng.normal(size=(N, 8))
    return x, x @ rng.normal(size=(8, 6)) + 0.7 * rng.normal(size=(N, 6))


def test_values_are_those_of_direct_calls(xy) -> None:
    x, y = xy
    table = interlingua.compare(
        x, y, measures=MEASURES, inference={"permutations": K, "jackknife_groups": 8}, seed=SEED
    )
    assert list(table["measure"]) == MEASURES and set(table["n"]) == {N}
    assert "layer_a" not in table.columns  # 2-D inputs: no layers
    control_seed = pair_seed(SEED, "X", "Y", ordered=True)
    perm = shuffle_permutation(N, control_seed)
    for row in table.itertuples():
        m = get_measure(row.measure)
        assert row.matched == pytest.approx(m(x, y), rel=1e-12, abs=1e-14)
        assert row.shuffled == pytest.approx(m(x, y[perm]), rel=1e-12, abs=1e-14)
        assert row.control_seed == control_seed
        res = permutation_test(row.measure, x, y, n_permutations=K, seed=SEED)
        assert row.p_value == res.p_value and row.null_q95 == res.null_quantiles[0.95]
        assert row.n_permutations == K
        jk = jackknife_interval(row.measure, x, y, n_groups=8, seed=SEED)
        assert (row.jackknife_low, row.jackknife_high, row.jackknife_se) == (jk.low, jk.high, jk.se)
        assert row.note == ""
    assert (table["p_value"] == 1 / (K + 1)).all()  # a strong linear relation: no null draw reaches it


def test_the_control_is_not_one_of_the_tests_draws(xy) -> None:
    x, y = xy
    table = interlingua.compare(x, y, inference={"permutations": K}, seed=SEED)
    m = get_measure("cka_linear_biased")
    first_draw = shuffle_permutation(N, SEED)  # permutation_test's first permutation
    assert table["shuffled"].iat[0] != pytest.approx(m(x, y[first_draw]))
    fixed = interlingua.compare(x, y, inference={"permutations": 0}, control_seed=SEED)
    assert fixed["shuffled"].iat[0] == pytest.approx(m(x, y[first_draw]), rel=1e-12)


def test_equals_the_pipelines_row_for_the_same_inputs(xy) -> None:
    from interlingua.comparison import compare_pair
    from interlingua.contract.pairs import Pair, Side, SideData

    x, y = xy
    rng = np.random.default_rng(5)
    stack_x = np.stack([x, x + rng.normal(size=x.shape)])
    stack_y = np.stack([y, y + rng.normal(size=y.shape)])
    seed, control_seed = 4, 17
    table = interlingua.compare(
        stack_x,
        stack_y,
        measures=MEASURES,
        inference={"permutations": K, "jackknife_groups": 5},
        seed=seed,
        control_seed=control_seed,
    )
    lengths = rng.integers(3, 30, size=(N, 2))
    sides = [SideData(s, lengths, np.zeros(2)) for s in (stack_x, stack_y)]
    rows = compare_pair(
        Pair(Side("a", "eng"), Side("b", "deu")),
        *sides,
        pooling="mean",
        measures=MEASURES,
        permutation=shuffle_permutation(N, control_seed),
        control_seed=control_seed,
        inference=InferenceSpec(permutations=K, jackknife_groups=5),
        test_seed=seed,
    )
    assert len(rows) == len(table) == len(MEASURES) * 2
    for got, want in zip(table.to_dict("records"), rows):
        for column in (
            "measure",
            "layer_a",
            "layer_b",
            "matched",
            "shuffled",
            "p_value",
            "null_q95",
            "jackknife_low",
            "jackknife_high",
            "n",
            "control_seed",
        ):
            assert got[column] == want[column], column


def test_layer_stacks_give_one_row_per_layer_and_measure(xy) -> None:
    x, y = xy
    table = interlingua.compare(
        np.stack([x, 2 * x, x]), np.stack([y, y, -y]), measures=MEASURES[:2], inference={"permutations": 0}
    )
    assert len(table) == 2 * 3 and list(table["layer_a"]) == [0, 1, 2, 0, 1, 2]
    assert table[["p_value", "jackknife_low", "bootstrap_low"]].isna().all().all()  # not asked for: NaN, there
    assert (table["n_permutations"] == 0).all()
    asked = interlingua.compare(
        np.stack([x, 2 * x, x]), np.stack([y, y, -y]), measures=MEASURES[:2], inference={"permutations": 9}
    )
    assert list(asked.columns) == list(table.columns)  # one schema whatever the options
    cka = table[table["measure"] == MEASURES[0]]["matched"].to_numpy()
    assert cka == pytest.approx([cka[0]] * 3, rel=1e-12)  # CKA ignores scale and sign
    deeper = interlingua.compare(np.stack([x, x, x]), np.stack([y, y]), inference={"permutations": 0})
    assert (deeper["layer_a"].tolist(), deeper["layer_b"].tolist()) == ([2], [1])  # different depth: last layers


def test_nan_values_say_why(xy) -> None:
    x, y = xy
    flat = np.ones_like(y)
    table = interlingua.compare(
        x, flat, measures=["cka_linear_biased", "anc_abs"], inference={"permutations": 9}, control=False
    )
    assert "shuffled" not in table.columns
    assert table["matched"].isna().all()
    assert all(table["note"].str.len() > 0)
    assert "equal width" in table["note"].iat[1]
    same = interlingua.compare(x, x + 0.1, measures=["anc_abs"], inference={"permutations": 0}, same_model=True)
    assert same["matched"].iat[0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "a, b, options, message",
    [
        (np.zeros((10, 3)), np.zeros((9, 3)), {}, r"X has 10 rows and Y 9: rows must be paired"),
        (np.zeros((10, 3)), np.zeros((2, 10, 3)), {}, r"two \(n, d\) arrays or two \(L, n, d\) stacks"),
        (np.zeros(10), np.zeros(10), {}, r"pass an \(n, d\) array"),
        (np.zeros((10, 3)), np.zeros((10, 3)), {"inference": {"permutations": -1}}, r"permutations=-1"),
        (np.zeros((10, 3)), np.zeros((10, 3)), {"inference": {"permutation": 5}}, r"permutation=5: Extra inputs"),
        (np.zeros((10, 3)), np.zeros((10, 3)), {"inference": 199}, r"pass an InferenceSpec or a dict"),
        (np.zeros((10, 3)), np.zeros((10, 3)), {"measures": []}, r"measures is empty"),
        (np.zeros((10, 3)), np.zeros((10, 3)), {"measures": ["cka"]}, r"unknown measure id 'cka'"),
        ([["a"]], [["b"]], {}, r"X is not a numeric array"),
    ],
)
def test_bad_input_is_a_measure_input_error(a, b, options, message) -> None:
    with pytest.raises(MeasureInputError, match=message):
        interlingua.compare(a, b, **options)


def test_compare_is_the_function_after_any_import() -> None:
    """Importing the compare capability (as every run does) leaves ``interlingua.compare`` the function."""
    import interlingua.comparison.capability  # noqa: F401
    from interlingua import compare, compare_arrays
    from interlingua.comparison import compare_arrays as defined
    from interlingua.pipeline import registry

    registry.capabilities()  # imports every capability package
    assert compare is compare_arrays is defined is interlingua.compare
    assert inspect.isfunction(interlingua.compare)
    assert "measures" in inspect.signature(interlingua.compare).parameters


def test_what_a_measure_adjusted_is_in_the_note() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 40)), rng.normal(size=(12, 40))  # wider than n: SVCCA keeps fewer components
    with pytest.warns(UserWarning):
        table = interlingua.compare(x, y, measures=["svcca_var0.99_max64"], inference={"permutations": 0})
    assert np.isfinite(table["matched"].iat[0]) and "principal components" in table["note"].iat[0]


def test_inference_is_a_run_section_or_a_dict_of_its_fields() -> None:
    """A run's ``inference:`` section and a dict of the same fields give the same table; the default is its default."""
    import pandas as pd

    from interlingua.analysis.inference.config import InferenceSpec

    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((24, 5)), rng.standard_normal((24, 5))
    spec = InferenceSpec(permutations=19, jackknife_groups=4, alpha=0.1)
    by_spec = interlingua.compare(x, y, measures=MEASURES[:2], inference=spec, seed=3)
    by_dict = interlingua.compare(
        x, y, measures=MEASURES[:2], inference={"permutations": 19, "jackknife_groups": 4, "alpha": 0.1}, seed=3
    )
    pd.testing.assert_frame_equal(by_spec, by_dict)
    assert (interlingua.compare(x, y, seed=3)["n_permutations"] == InferenceSpec().permutations).all()
