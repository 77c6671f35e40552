"""The second example capability (``tests/fixtures/retrieval_capability.py``), end to end through the real pipeline.

Registered with one line, its section parses, its task is planned for the within-model pair, run from the two
extracted sides, stored, read back on a rerun, tabled with its declared columns and reported with its figure;
its P@1 agrees with an independent computation (scipy's cosine distances) on the stored sides, and its
declaration passes the capability battery, including the hooks issue 37 adds (cost, example, columns, figures).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist

from fixtures.plugins import parallel_tsv, plugin_spec, register
from fixtures.retrieval_capability import COLUMNS, REGISTRY_LINE, RETRIEVAL, cost, example, p_at_1
from interlingua.core.errors import ConfigError
from interlingua.pipeline import config
from interlingua.pipeline.runs import run
from interlingua.testing import CheckFailed, capability_checks, check_capability


@pytest.fixture
def retrieval_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry with the retrieval capability's line added, and the run spec rebuilt from it."""
    register(monkeypatch, REGISTRY_LINE)


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return parallel_tsv(tmp_path_factory.mktemp("corpus"), seed=7)


def _stored_layers(tmp_path: Path, language: str) -> np.ndarray:
    from safetensors.numpy import load_file

    (path,) = (tmp_path / "cache" / "representations").rglob(f"{language}.mean*.safetensors")
    return load_file(path)["representations"].astype(np.float64)


def _p_at_1_scipy(a: np.ndarray, b: np.ndarray) -> float:
    """Nearest translation by scipy's cosine distance between centred rows (an independent computation)."""
    d = cdist(a - a.mean(0), b - b.mean(0), "cosine")
    return float(np.mean(d.argmin(1) == np.arange(len(a))))


def test_the_declaration_passes_the_battery_with_its_cost_example_and_columns() -> None:
    names = [c.name for c in capability_checks(RETRIEVAL)]
    assert {"kind_cost[retrieval]", "kind_example[retrieval]", "columns"} <= set(names)
    assert check_capability(RETRIEVAL) == names
    # with a cost context (the models' shapes and the float64 rate, as the cost model's) the example is priced
    ctx = SimpleNamespace(shapes={"m": SimpleNamespace(layers=2, hidden=32)}, rate64=2e9)
    assert check_capability(RETRIEVAL, cost_context=ctx) == names
    broken = SimpleNamespace(shapes={"m": SimpleNamespace(layers=2, hidden=32)}, rate64=-2e9)  # a negative price
    with pytest.raises(CheckFailed, match=r"kind_cost\[retrieval\]' failed: .*not a finite number of seconds"):
        check_capability(RETRIEVAL, cost_context=broken)


def test_p_at_1_is_one_for_a_shifted_scaled_copy_and_falls_for_a_rotated_one() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((50, 8))
    # centring removes the shift and the cosine the scale: every row finds its twin
    assert p_at_1(a, 3.0 * a + 5.0, center=True) == (1.0, 1.0)
    assert p_at_1(a, a + 1e-3 * rng.standard_normal(a.shape), center=False) == (1.0, 1.0)
    # another basis (why the capability takes pairs within one model): a rotated copy is not found
    q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    assert max(p_at_1(a, a @ q, center=True)) < 0.5


def test_cost_is_the_product_s_flops() -> None:
    task, stored = example()
    ctx = SimpleNamespace(shapes={"m": SimpleNamespace(layers=2, hidden=32)}, rate64=2e9)
    assert cost(task, ctx).total == pytest.approx(3 * 2.0 * 16**2 * 32 / 2e9)
    assert stored == [{"row": 1}] and task.kind == "retrieval"


def test_an_unknown_pooling_is_its_own_config_error(retrieval_registered, tmp_path, corpus_tsv, tiny_gpt2_path) -> None:
    with pytest.raises(ConfigError, match="retrieval.pooling 'last' is not among the run's poolings"):
        config.parse_spec(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, retrieval={"pooling": "last"}))


@pytest.mark.pipeline
def test_it_plans_runs_stores_tables_and_reports(retrieval_registered, tmp_path, corpus_tsv, tiny_gpt2_path) -> None:
    first = run(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, retrieval={}))
    assert first.info["plan"]["retrieval"] == 1 and first.info["computed"]["retrieval"] == 1
    # priced by its own hook, on its own line of the estimate (nothing in pipeline/cost.py names it)
    assert first.estimate is not None and first.estimate.phase("retrieval").seconds > 0
    out = Path(first.output)
    table = pd.read_csv(out / "retrieval.csv")
    assert list(table.columns) == [c.name for c in COLUMNS["retrieval"]]
    eng, deu = _stored_layers(tmp_path, "eng_Latn"), _stored_layers(tmp_path, "deu_Latn")
    assert len(table) == len(eng) and list(table["layer"]) == list(range(len(eng)))
    forward = table["pair"].iat[0].startswith("gpt2:eng")
    a_layers, b_layers = (eng, deu) if forward else (deu, eng)
    for row in table.itertuples():
        assert row.p_at_1_ab == pytest.approx(_p_at_1_scipy(a_layers[row.layer], b_layers[row.layer]), abs=1e-12)
        assert row.p_at_1_ba == pytest.approx(_p_at_1_scipy(b_layers[row.layer], a_layers[row.layer]), abs=1e-12)
    assert (table["chance"] == 1 / 16).all() and (table["n"] == 16).all()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## Cross-lingual retrieval" in report and "![retrieval](figures/retrieval.png)" in report
    assert (out / "figures" / "retrieval.png").stat().st_size > 0
    # a rerun reads the stored rows: nothing computed, the same table
    again = run(plugin_spec(tmp_path, corpus_tsv, tiny_gpt2_path, retrieval={}, overwrite=True))
    assert again.info["computed"].get("retrieval", 0) == 0
    pd.testing.assert_frame_equal(again.tables["retrieval"], first.tables["retrieval"])
