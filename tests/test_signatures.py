"""No function takes a config section exploded into a dozen keywords (issue 37: option objects instead).

A group of settings that travels together is one frozen options object (``MapOptions``,
``PlanOptions``, ``PatchOptions``, ``AlignOptions``, ``TrainSchedule``...), built in one place from its
config section. The only exceptions are public entry points whose keyword-only parameters are the user's
interface, each named here with its reason.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "interlingua"
LIMIT = 11  # parameters (self/cls not counted): 12 or more is a keyword list that should be an object

#: public entry points allowed more, with the reason
PUBLIC_KEYWORDS = {
    "data/representations/extract.py::extract": "the Python API's extraction call: model, sentences, poolings and "
    "keyword-only run settings a user passes one at a time (tokenizer, batch size, threads, max_layer...)",
}


@functools.cache
def _counts() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                n = len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)
                key = f"{path.relative_to(SRC).as_posix()}::{node.name}"
                out[key] = max(n, out.get(key, 0))
    return out


def test_no_function_takes_a_dozen_parameters() -> None:
    over = {name: n for name, n in _counts().items() if n > LIMIT and name not in PUBLIC_KEYWORDS}
    assert not over, f"group these parameters into an options object: {over}"


def test_every_exception_is_still_needed() -> None:
    counts = _counts()
    stale = [name for name in PUBLIC_KEYWORDS if counts.get(name, 0) <= LIMIT]
    assert not stale, f"no longer over the limit, drop from PUBLIC_KEYWORDS: {stale}"
