"""The models subpackage: no import cycles, and nothing heavy for config checks and pre-flight."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import interlingua.data.models

PACKAGE = Path(interlingua.data.models.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
# What validating a config and pre-flight checks must never import.
HEAVY = ("torch", "transformers.modeling_utils", "peft")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)


def _imported_models_modules(module: str) -> set[str]:
    """Sibling modules that ``module`` imports anywhere (top level or inside functions)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                names = [node.module] if node.module else [a.name for a in node.names]
            elif node.module and node.module.startswith("interlingua.data.models"):
                rest = node.module.removeprefix("interlingua.data.models").lstrip(".")
                names = [rest.split(".")[0]] if rest else [a.name for a in node.names]
            else:
                continue
            found.update(n.split(".")[0] for n in names if n)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("interlingua.data.models."):
                    found.add(alias.name.split(".")[2])
    return found & set(MODULES)


def test_the_models_modules_are_known() -> None:
    assert {"source", "hashing", "fingerprint", "loading", "preflight", "table"} <= set(MODULES)


def test_fingerprint_and_source_do_not_import_loading() -> None:
    assert "loading" not in _imported_models_modules("fingerprint")
    assert "loading" not in _imported_models_modules("source")
    assert "source" in _imported_models_modules("fingerprint")
    assert "source" in _imported_models_modules("loading")


def test_the_import_graph_has_no_cycle() -> None:
    graph = {m: _imported_models_modules(m) for m in MODULES}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                pytest.fail(f"import cycle: {' -> '.join([*path, node, nxt])}")
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for module in MODULES:
        if module not in state:
            visit(module, [])


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone(module: str) -> None:
    result = _run(f"import interlingua.data.models.{module}")
    assert result.returncode == 0, result.stderr[-2000:]


def test_public_names_resolve_lazily() -> None:
    import interlingua.data.models as models

    for name in models.__all__:
        assert getattr(models, name) is not None, name
    assert models.loading.load_model is models.load_model
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        models.no_such_name  # noqa: B018


@pytest.mark.slow
def test_config_validation_and_preflight_never_import_torch(tiny_gpt2_path: Path) -> None:
    code = f"""
import json, sys
heavy = {HEAVY!r}
seen = {{}}
from interlingua.data.models import ModelSpec
import interlingua.data.models.spec
seen["models"] = [m for m in heavy if m in sys.modules]
import interlingua.pipeline.config
spec = interlingua.pipeline.config.parse_spec({{
    "output": "out",
    "corpus": {{"source": "local", "path": "corpus.tsv", "languages": ["eng_Latn", "deu_Latn"]}},
    "models": [{{"name": "tiny", "path": {str(tiny_gpt2_path)!r}}}],
}})
seen["config"] = [m for m in heavy if m in sys.modules]
from interlingua.data.models import preflight_model
report = preflight_model(spec.models[0])
seen["preflight"] = [m for m in heavy if m in sys.modules]
seen["report"] = report
print(json.dumps(seen))
"""
    result = _run(code)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["models"] == [], "importing ModelSpec imported " + ", ".join(seen["models"])
    assert seen["config"] == [], "validating a config imported " + ", ".join(seen["config"])
    assert seen["preflight"] == [], "preflight imported " + ", ".join(seen["preflight"])
    assert seen["report"]["model_type"] == "gpt2" and seen["report"]["num_layers"] == 2
