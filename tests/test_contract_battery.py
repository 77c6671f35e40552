"""``interlingua.testing``: every registered measure, map estimator and capability passes its battery, and a
deliberately broken one of each fails it, with the right check named.

The batteries are parametrized check by check (``measure_checks`` / ``map_estimator_checks`` /
``capability_checks``), so a failure names the subject and the check in the test id.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pytest

from fixtures.retrieval_capability import RETRIEVAL
from fixtures.toy_capability import TOY
from interlingua.analysis.measures import (
    Measure,
    MeasureMetadata,
    MeasureResult,
    get_measure,
    linear_cka,
    list_measures,
)
from interlingua.analysis.measures.validation import check_pair
from interlingua.contract.capability import Capability, Kind
from interlingua.core.errors import InterlinguaError
from interlingua.maps import Procrustes, list_maps
from interlingua.maps.estimators import Ridge
from interlingua.pipeline import registry
from interlingua.testing import (
    Check,
    CheckFailed,
    capability_checks,
    check_capability,
    check_map_estimator,
    check_measure,
    map_estimator_checks,
    measure_checks,
)

MEASURE_CHECKS = [c for m in list_measures() for c in measure_checks(m)]
MAP_CHECKS = [c for m in list_maps() for c in map_estimator_checks(m)]
CAPABILITY_CHECKS = [c for cap in (*registry.capabilities(), TOY, RETRIEVAL) for c in capability_checks(cap)]


@pytest.mark.parametrize("check", MEASURE_CHECKS, ids=str)
def test_every_registered_measure_passes(check: Check) -> None:
    check()


@pytest.mark.parametrize("check", MAP_CHECKS, ids=str)
def test_every_registered_map_estimator_passes(check: Check) -> None:
    check()


@pytest.mark.parametrize("check", CAPABILITY_CHECKS, ids=str)
def test_every_registered_capability_passes(check: Check) -> None:
    check()


def test_the_batteries_cover_what_the_registries_declare() -> None:
    """Every declared invariance, fast path and claim gets its check (the metadata is what is checked)."""
    for mid in list_measures():
        meta = get_measure(mid).metadata
        names = {c.name for c in measure_checks(mid)}
        assert {f"invariance[{k}]" for k in meta.invariances} <= names
        assert ("gram_form" in names) == meta.gram and ("prepared_form" in names) == meta.prepared
    assert {c.subject for c in MAP_CHECKS if c.name == "planted_rotation"} == {
        "procrustes",
        "procrustes_scaled",
        "procrustes_span",
        "affine",
        "ridge",
    }
    assert {c.subject for c in CAPABILITY_CHECKS} == {c.name for c in registry.capabilities()} | {"toy", "retrieval"}


def test_one_call_runs_the_whole_battery() -> None:
    assert check_measure("cka_linear_biased") == [c.name for c in measure_checks("cka_linear_biased")]
    assert check_map_estimator(Procrustes(scale=True)) == [c.name for c in map_estimator_checks("procrustes_scaled")]
    assert check_capability(TOY) == [c.name for c in capability_checks(TOY)]


def _failed(checks: list[Check]) -> list[str]:
    out = []
    for c in checks:
        try:
            c()
        except CheckFailed as err:
            assert err.check == c.name and err.subject == c.subject
            out.append(c.name)
    return out


# -- a broken measure ----------------------------------------------------------------------------------------


def _weighted_cka(X: Any, Y: Any) -> MeasureResult:
    """Linear CKA after weighting X's columns 1, 2, 3, ...: not invariant to rotating X (it declares it is)."""
    x, y = check_pair(X, Y, min_n=3, what="weighted_cka")
    w = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    return MeasureResult(linear_cka(x * w, y), "", "linear CKA of column-weighted X", x.shape[0])


BROKEN_MEASURE = Measure(
    "weighted_cka",
    MeasureMetadata(
        larger_is_more_similar=True,
        symmetric=False,
        invariances=frozenset({"orthogonal", "isotropic_scale", "translation"}),
        min_n=3,
        estimator="linear CKA of column-weighted X",
    ),
    _weighted_cka,
)


def test_a_measure_not_invariant_to_what_it_declares_fails_that_check() -> None:
    failed = _failed(list(measure_checks(BROKEN_MEASURE)))
    assert "invariance[orthogonal]" in failed
    assert "invariance[isotropic_scale]" not in failed and "invariance[translation]" not in failed
    with pytest.raises(CheckFailed, match=r"weighted_cka: check 'invariance\[orthogonal\]' failed: declares"):
        check_measure(BROKEN_MEASURE)


def test_under_declared_metadata_and_a_wrong_bound_fail_their_checks() -> None:
    """The real linear CKA declared without its permutation invariance, and with a bound its values break."""
    cka = get_measure("cka_linear_biased")
    under = replace(cka, metadata=replace(cka.metadata, invariances=cka.metadata.invariances - {"permutation"}))
    assert _failed(list(measure_checks(under))) == ["undeclared_invariance[permutation]"]
    narrow = replace(cka, metadata=replace(cka.metadata, bounds=(0.9, 1.0)))
    assert "finite" in _failed(list(measure_checks(narrow)))


# -- a broken map estimator ----------------------------------------------------------------------------------


class TransposedProcrustes(Procrustes):
    """Procrustes whose fitted matrix is stored transposed: x R^T instead of x R."""

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        super()._fit(x, y)
        self.coef_ = np.ascontiguousarray(self.coef_.T)
        self.intercept_ = y.mean(0) - x.mean(0) @ self.coef_  # means still map to means: only the orientation errs


class MutatingRidge(Ridge):
    """Ridge that centres its caller's X in place."""

    def fit(self, X: Any, Y: Any) -> MutatingRidge:
        out = super().fit(X, Y)
        if isinstance(X, np.ndarray):
            X -= X.mean(0)
        return out


class UndeclaredProcrustes(Procrustes):
    """Procrustes that says nothing about under-determined fits."""

    underdetermined = None


def test_a_transposed_estimator_fails_the_planted_rotation() -> None:
    checks = {c.name: c for c in map_estimator_checks(TransposedProcrustes())}
    with pytest.raises(CheckFailed, match="'planted_rotation' failed: .*a transposed map"):
        checks["planted_rotation"]()
    failed = _failed(list(checks.values()))
    # a square fit is well formed (only its orientation is wrong); a 6 -> 4 fit cannot even give width 4
    assert "planted_rotation" in failed and "fit_shapes" in failed
    assert {"params", "unfitted_refused", "deterministic", "inputs_unchanged"}.isdisjoint(failed)
    with pytest.raises(CheckFailed) as err:
        check_map_estimator(TransposedProcrustes())
    assert err.value.check == failed[0]


def test_an_estimator_that_changes_its_inputs_or_declares_nothing_fails_that_check() -> None:
    assert "inputs_unchanged" in _failed(list(map_estimator_checks(MutatingRidge())))
    # (these test classes are not registered, so save_load fails too: load_map cannot rebuild them)
    assert _failed(list(map_estimator_checks(UndeclaredProcrustes()))) == ["save_load", "underdetermined"]
    wrong = type("WarnedAffine", (Procrustes,), {"underdetermined": "refuse"})  # procrustes warns, not refuses
    assert _failed(list(map_estimator_checks(wrong()))) == ["save_load", "underdetermined"]
    with pytest.raises(CheckFailed, match="UndeclaredProcrustes is not registered"):
        {c.name: c for c in map_estimator_checks(UndeclaredProcrustes())}["save_load"]()


# -- a broken capability -------------------------------------------------------------------------------------


def _runner(rt: Any, task: Any, done: dict[str, Any]) -> None:
    return None


def test_a_duplicate_kind_name_fails_the_kinds_check() -> None:
    @dataclass(frozen=True)
    class TwiceTask:
        kind: ClassVar[str] = "twice"
        key: str = "k-twice"
        depends: tuple[str, ...] = ()

    hooks = {"phase": TOY.kinds[0].phase, "cost": TOY.kinds[0].cost, "example": lambda: (TwiceTask(), None)}
    twice = Capability(
        "twice",
        kinds=(
            Kind("twice", ("twice_a",), runner=_runner, **hooks),
            Kind("twice", ("twice_b",), runner=_runner, **hooks),
        ),
    )
    assert _failed(list(capability_checks(twice))) == ["kinds"]
    with pytest.raises(CheckFailed, match=r"twice: check 'kinds' failed: kind name\(s\) \['twice'\] declared twice"):
        check_capability(twice)
    taken = Capability("clash", kinds=(Kind("maps", ("clash",), runner=_runner),))
    with pytest.raises(CheckFailed, match="'maps' \\(by maps\\)"):
        check_capability(taken)


def test_other_broken_declarations_fail_their_checks() -> None:
    no_runner = replace(TOY, kinds=(replace(TOY.kinds[0], runner=None),))
    assert _failed(list(capability_checks(no_runner))) == ["runners"]
    from pydantic import BaseModel

    class Loose(BaseModel):  # unknown keys silently ignored: a typo would switch nothing on
        scale: float = 1.0

    assert "section" in _failed(list(capability_checks(replace(TOY, section=Loose))))
    same_name = replace(TOY, name="maps", kinds=(replace(TOY.kinds[0], name="toy2", namespaces=("toy2",)),))
    assert "unique_name" in _failed(list(capability_checks(same_name)))
    shared = replace(TOY, kinds=(replace(TOY.kinds[0], namespaces=("comparisons",)),))
    assert _failed(list(capability_checks(shared))) == ["kinds"]
    pipeline_s = replace(TOY, kinds=(replace(TOY.kinds[0], namespaces=("representations",)),))
    with pytest.raises(CheckFailed, match="namespace 'representations' is written by the pipeline"):
        check_capability(pipeline_s)
    import pandas as pd

    eager = replace(TOY, tables=lambda plan, done, built: {"toy": pd.DataFrame({"pair": ["a|b"], "score": [0.5]})})
    assert _failed(list(capability_checks(eager))) == ["tables_on_empty_run"]


def test_check_failed_is_an_assertion_and_the_package_s_error() -> None:
    err = CheckFailed("m", "symmetry", "differs")
    assert isinstance(err, AssertionError) and isinstance(err, InterlinguaError)
    assert str(err) == "m: check 'symmetry' failed: differs"
    with pytest.raises(TypeError, match="needs a Measure"):
        list(measure_checks(3.0))  # type: ignore[arg-type]


def test_the_docs_page_runs() -> None:
    """The ```python blocks of docs/testing.md run in order as one script (what a plugin author copies)."""
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "testing.md"
    blocks = re.findall(r"^```python\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 5
    namespace: dict[str, Any] = {"__name__": "docs_testing"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"testing.md[block {i}]", "exec"), namespace)  # noqa: S102 - our own docs
    checks = namespace["test_my_cka"].pytestmark[0].args[1]
    assert {c.name for c in checks} >= {"invariance[orthogonal]", "min_n"}
    for check in checks:
        check()
