"""The audit tests reuse the zoo tests' session fixture ``tiny_zoo`` (the tiny family, built once)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_interlingua_zoo_conftest", Path(__file__).resolve().parents[1] / "zoo" / "conftest.py"
)
_zoo_conftest = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _zoo_conftest
_spec.loader.exec_module(_zoo_conftest)

tiny_zoo = _zoo_conftest.tiny_zoo
