"""The one registry style (interlingua.core.named.Registry) and the registries built on it."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from interlingua.core.errors import MeasureInputError
from interlingua.core.named import Registry


class _Unknown(LookupError):
    pass


def _registry() -> Registry[int]:
    reg: Registry[int] = Registry("thing", error=_Unknown, unknown="no thing {name!r}; have {names}; or {families}")
    reg.add("one", 1)
    reg.add("two", 2)
    reg.add_family(r"n(\d+)", lambda m: int(m.group(1)), "n<k>")
    return reg


def test_add_get_names_in_declaration_order():
    reg = _registry()
    assert reg.get("two") == 2 and reg.get("one") == 1
    assert reg.names() == ["one", "two"] and list(reg) == ["one", "two"] and len(reg) == 2
    assert reg.items() == [("one", 1), ("two", 2)]
    assert "one" in reg and "n5" not in reg  # families are not names
    assert reg.families() == ["n<k>"]


def test_a_second_declaration_of_a_name_or_a_family_is_refused():
    reg = _registry()
    with pytest.raises(ValueError, match="thing 'one' registered twice"):
        reg.add("one", 3)
    with pytest.raises(ValueError, match="family .* registered twice"):
        reg.add_family(r"n(\d+)", lambda m: 0, "n<k>")
    assert reg.get("one") == 1


def test_unknown_name_raises_the_callers_error_with_the_known_names():
    reg = _registry()
    with pytest.raises(_Unknown, match=re.escape("no thing 'three'; have one, two; or n<k>")):
        reg.get("three")
    with pytest.raises(_Unknown, match="no thing None"):  # not a string: unknown, not a TypeError
        reg.get(None)  # type: ignore[arg-type]
    plain: Registry[int] = Registry("widget")
    with pytest.raises(LookupError, match=re.escape("unknown widget 'x'; known: .")):
        plain.get("x")


def test_family_lookup_matches_the_whole_name_and_an_exact_name_wins():
    reg = _registry()
    assert reg.get("n12") == 12
    with pytest.raises(_Unknown):
        reg.get("n12x")  # the pattern must match the whole name
    reg.add("n7", 70)
    assert reg.get("n7") == 70


def test_measures_maps_and_merge_methods_are_registries():
    from interlingua.analysis.measures import get_measure, list_measures
    from interlingua.analysis.measures.base import MEASURES
    from interlingua.maps.estimators import MAPS, list_maps

    assert isinstance(MEASURES, Registry) and MEASURES.names() == list_measures()
    assert get_measure("mknn_k5").id == "mknn_k5"
    with pytest.raises(MeasureInputError, match="Parameterised families: .*mknn_k<k>"):
        get_measure("nope")
    assert isinstance(MAPS, Registry) and MAPS.names() == list_maps()

    pytest.importorskip("torch")
    from interlingua.data.models.spec import MergeMethod
    from interlingua.mergeability.merge import BASE_FREE, MERGE_METHODS, METHODS

    assert tuple(MERGE_METHODS.names()) == METHODS
    # the config's torch-free Literal names the same methods, in the same order
    assert get_args(MergeMethod) == METHODS
    assert BASE_FREE == ("linear", "slerp")
    for name, method in MERGE_METHODS.items():
        assert method.name == name and method.min_models >= 1
        assert method.options <= {"weights", "t", "density", "lambda_", "normalize", "rescale", "seed"}
        assert method.seeded == ("seed" in method.options)
