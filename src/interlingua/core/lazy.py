"""Lazy package exports: a package's public names imported from their submodule on first use.

A package ``__init__`` maps each name to its submodule (``_LAZY``) and defines
``def __getattr__(name): return _load(name)`` with ``_load = lazy_loader(__name__, _LAZY)``, so importing the
package stays cheap (no torch, scipy or matplotlib until a name that needs them is read).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_loader(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """The loader behind ``package``'s module ``__getattr__``: ``table`` maps a name to its submodule; the value
    is cached on the package, so each name is imported once; an unknown name is an ``AttributeError``."""

    def load(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return load
