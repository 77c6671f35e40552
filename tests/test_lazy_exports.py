"""Every public name of a package that exports lazily resolves, and is read once (cached on the package)."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "interlingua.analysis.inference",
    "interlingua.audit",
    "interlingua.mergeability",
    "interlingua.transport",
    "interlingua.zoo",
]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_cached(package: str) -> None:
    mod = importlib.import_module(package)
    for name in mod.__all__:
        value = getattr(mod, name)
        assert vars(mod)[name] is value  # cached: the next read does not go through __getattr__
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'not_a_name'"):
        mod.not_a_name  # noqa: B018
