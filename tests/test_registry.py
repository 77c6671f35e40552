"""A capability is its package plus one registry line: the toy capability of docs/ARCHITECTURE.md, end to end.

Registered (one line added to ``registry.CAPABILITIES``), the toy's section is a key of the run spec (its
unknown keys and its cross-check are config errors), its tasks are planned, run by its runner, stored in its
namespace (which the store sweeps), read back on a rerun, tabled (``toy.csv``), reported (its section of
``report.md``), and grouped by the Ray
executor like any pair kind; unregistered, ``toy:`` is an unknown key. Tiny models, no network.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.plugins import parallel_tsv, plugin_spec, register
from fixtures.toy_capability import REGISTRY_LINE, ToyTask
from interlingua.core.errors import ConfigError
from interlingua.pipeline import config, registry
from interlingua.pipeline.executors.ray import group_tasks
from interlingua.pipeline.runs import run


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry with the toy's line added, and the run spec rebuilt from it (as at import)."""
    register(monkeypatch, REGISTRY_LINE)


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return parallel_tsv(tmp_path_factory.mktemp("corpus"), seed=5)


def test_an_unregistered_capability_s_key_is_unknown(tmp_path, corpus_tsv, tiny_gpt2_path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'toy'"):
        config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scale": 2.0}))


def test_a_registered_capability_s_section_is_validated(toy_registered, tmp_path, corpus_tsv, tiny_gpt2_path) -> None:
    spec = config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scale": 2.0}))
    assert spec.toy.scale == 2.0  # type: ignore[attr-defined]
    assert config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path)).toy is None  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"toy.scal: unknown key 'scal' ; did you mean 'scale'\?"):
        config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scal": 2.0}))
    with pytest.raises(ConfigError, match="toy.pooling 'last' is not among the run's poolings"):  # its own check
        config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"pooling": "last"}))
    assert "toy" in registry.entry_namespaces()  # so the store's sweep tidies what a killed toy task left


@pytest.mark.pipeline
def test_a_registered_capability_plans_runs_stores_and_tables(
    toy_registered, tmp_path, corpus_tsv, tiny_gpt2_path
) -> None:
    first = run(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scale": 2.0}))
    assert first.info["plan"]["toy"] == 1 and first.info["computed"]["toy"] == 1
    toy = pd.read_csv(Path(first.output) / "toy.csv")
    report = (Path(first.output) / "report.md").read_text(encoding="utf-8")
    assert "## Toy scores" in report and f"{toy['score'].iat[0]:.3f}" in report.split("## Toy scores")[1]
    assert len(toy) == 1 and toy["n"].iat[0] == 16
    # the glossary describes the toy's columns with the text the toy declares (Capability.columns)
    assert "| `score` | scale x the mean cosine of matched rows at both sides' last layers |" in report
    # the value is what the runner's formula gives on the stored sides (an independent computation)
    eng = _last_layer(tmp_path, "eng_Latn")
    deu = _last_layer(tmp_path, "deu_Latn")
    a, b = (eng, deu) if toy["pair"].iat[0].startswith("gpt2:eng") else (deu, eng)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert toy["score"].iat[0] == pytest.approx(2.0 * cos.mean(), rel=1e-12)
    # a rerun reads the toy's stored rows: nothing computed, the same table
    again = run(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scale": 2.0}, overwrite=True))
    assert again.info["computed"].get("toy", 0) == 0
    pd.testing.assert_frame_equal(again.tables["toy"], first.tables["toy"])
    # another option is another key: computed again
    third = run(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scale": 3.0}, overwrite=True))
    assert third.info["computed"]["toy"] == 1
    assert third.tables["toy"]["score"].iat[0] == pytest.approx(1.5 * first.tables["toy"]["score"].iat[0])


def _last_layer(tmp_path: Path, language: str) -> np.ndarray:
    from safetensors.numpy import load_file

    (path,) = (tmp_path / "cache" / "representations").rglob(f"{language}.mean*.safetensors")
    return load_file(path)["representations"][-1].astype(np.float64)


def test_the_ray_executor_groups_a_registered_pair_kind_like_the_others(toy_registered) -> None:
    from types import SimpleNamespace

    from interlingua.contract.pairs import Pair, Side
    from interlingua.pipeline.plan import ExtractTask, Plan

    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    sides = (ExtractTask("e1", "m", "eng_Latn", (), ()), ExtractTask("e2", "m", "deu_Latn", (), ()))
    tasks = [ToyTask("t1", pair, ("e1", "e2"), ("e1", "e2")), ToyTask("t2", pair, ("e1", "e2"), ("e1", "e2"))]
    models = {"m": SimpleNamespace(path="/m", package=None, device="cpu")}
    plan = Plan(spec=None, corpus=None, models=models, fingerprints={"m": "1" * 64}, pairs=[pair])  # type: ignore[arg-type]
    plan.tasks = [*sides, *tasks]
    grouped = group_tasks(plan, tasks, side_block=8)
    assert len(grouped) == 1 and not grouped[0].loads_model  # a pair kind: batched by its sides, holds no model
    assert [g.name for g in group_tasks(plan, tasks)] == ["toy:t1", "toy:t2"]


_CHANGED = itertools.count()


def _with_kind(monkeypatch: pytest.MonkeyPatch, **changes: object) -> list[str]:
    """The registry's lines plus a toy whose one kind is changed by ``changes`` (declared in the toy's module, under
    a name of its own: the registry caches what it loaded by path)."""
    import dataclasses

    from fixtures import toy_capability

    (kind,) = toy_capability.TOY.kinds
    changed = dataclasses.replace(toy_capability.TOY, kinds=(dataclasses.replace(kind, **changes),))
    name = f"CHANGED_{next(_CHANGED)}"
    monkeypatch.setattr(toy_capability, name, changed, raising=False)
    return [*registry.CAPABILITIES, f"fixtures.toy_capability:{name}"]


@pytest.mark.parametrize("missing", ["cost", "phase", "example"])
def test_a_kind_without_a_cost_or_an_example_cannot_be_registered(monkeypatch, missing: str) -> None:
    """Never priced at 0 s unseen: the registry refuses the kind when it loads (and says what to declare)."""
    paths = _with_kind(monkeypatch, **{missing: None})
    with pytest.raises(ValueError, match=f"task kind 'toy' has no {'example' if missing == 'example' else 'cost'}"):
        registry._kinds(tuple(paths))


def test_one_phase_name_is_one_declaration(monkeypatch) -> None:
    from interlingua.contract.capability import CostPhase

    paths = _with_kind(monkeypatch, phase=CostPhase("comparisons", 99))  # compare's phase, declared differently
    with pytest.raises(ValueError, match="cost phase 'comparisons' is declared twice"):
        registry._kinds(tuple(paths))


def test_a_registered_kind_is_priced_by_its_own_hook(toy_registered, tmp_path, corpus_tsv, tiny_gpt2_path) -> None:
    """The toy's tasks count in its own phase, at what its hook says: 6 n d float64 operations at the nominal
    machine's float64 rate (computed here from the shapes given), after the comparisons in rank order."""
    from interlingua.pipeline import cost
    from interlingua.pipeline.plan import build_plan
    from interlingua.pipeline.preflight import load_run_corpus

    spec = config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, toy={"scale": 2.0}))
    corpus = load_run_corpus(spec)
    plan = build_plan(spec, corpus, {"gpt2": "1" * 64})
    shape = cost.ModelShape(layers=2, hidden=24, params=10_000, vocab=100, weight_bytes=0, source="facts")
    with cost.nominal_machine():
        est = cost.estimate(plan, {}, None, stored=False, shapes={"gpt2": shape})
    toy = est.phase("toy scores")
    assert (toy.tasks, toy.stored) == (1, 0) and est.kinds["toy"] == (1, 0)
    assert toy.seconds == 6.0 * len(corpus) * 24 / cost.NOMINAL_RATES["float64"]
    names = [p.name for p in est.phases]
    assert names.index("comparisons") < names.index("toy scores") < names.index("outputs (tables, report, figures)")
    assert cost.advice(est, most=10)  # its advice is found by its phase's name like any other
