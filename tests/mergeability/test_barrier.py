"""Loss barriers on the tiny zoo: definition identities only (no claim about the values).

Checkpoints of one run (English step32 vs final) and two independent runs (English vs
German final: same architecture and vocabulary size, different tokenizers; each text set is
scored with its own side's tokenizer).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from interlingua.core.schema import column_names
from interlingua.mergeability import WeightsError
from interlingua.mergeability.barrier import CURVE_COLUMNS, SUMMARY_COLUMNS, loss_barrier

ENG, DEU = "eng_Latn", "deu_Latn"
N_SENTENCES = 12


def _texts(zoo, lang: str) -> list[str]:
    from interlingua.zoo.data import load_zoo_data

    return load_zoo_data(zoo.config).heldout_texts(lang)[:N_SENTENCES]


def _own_nll(model: Path, tokenizer: Path, sentences: list[str]) -> float:
    """The endpoint's own NLL: the checkpoint loaded on its own, as the audit loads it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interlingua.data.causal_lm import mean_nll

    lm = AutoModelForCausalLM.from_pretrained(str(model), dtype="auto")
    return mean_nll(lm, AutoTokenizer.from_pretrained(str(tokenizer)), sentences)[0]


def _identities(result) -> None:
    curve, summary = result.curve, result.summary
    assert list(curve.columns) == column_names(CURVE_COLUMNS)
    assert list(summary.columns) == column_names(SUMMARY_COLUMNS)
    for row in summary.itertuples(index=False):
        points = curve[curve["text"] == row.text].sort_values("t")
        assert list(points["t"]) == list(result.grid) and result.grid[0] == 0.0 and result.grid[-1] == 1.0
        assert points["excess"].iloc[0] == 0.0 and points["excess"].iloc[-1] == 0.0  # exactly, by definition
        assert row.nll_a == points["nll"].iloc[0] and row.nll_b == points["nll"].iloc[-1]
        assert row.barrier == points["excess"].max() >= 0
        assert row.t_barrier == points.loc[points["excess"].idxmax(), "t"]
        assert row.best_nll == points["nll"].min() and row.best_gain == min(row.nll_a, row.nll_b) - row.best_nll >= 0
        assert (points["n_tokens"] == row.n_tokens).all() and row.n_tokens > 0


def test_same_run_endpoints_are_the_checkpoints(tiny_zoo, monkeypatch):
    import transformers

    a, b = tiny_zoo.folder / ENG / "step32", tiny_zoo.folder / ENG / "final"
    english = _texts(tiny_zoo, ENG)
    loads = []
    real = transformers.AutoModelForCausalLM.from_pretrained

    def counting(*args, **kwargs):
        loads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", counting)
    result = loss_barrier(a, b, english, ts=[0.5])
    assert loads == [str(a)]  # one model instance, overwritten in place at every t
    monkeypatch.undo()
    _identities(result)
    assert result.coverage.route == "native"
    curve = result.curve.set_index("t")
    assert curve.loc[0.0, "nll"] == _own_nll(a, a, english)  # exactly: t = 0 IS A
    assert curve.loc[1.0, "nll"] == _own_nll(b, a, english)  # exactly: t = 1 IS B


def test_interior_point_equals_the_built_lerp(tiny_zoo, tmp_path):
    from interlingua.mergeability.merge import build_merge

    a, b = tiny_zoo.folder / ENG / "step32", tiny_zoo.folder / ENG / "final"
    english = _texts(tiny_zoo, ENG)
    result = loss_barrier(a, b, english, ts=[0.5])
    build_merge([a, b], tmp_path / "half", method="linear", weights=[0.5, 0.5])
    assert result.curve.set_index("t").loc[0.5, "nll"] == _own_nll(tmp_path / "half", a, english)


def test_independent_runs_each_side_with_its_tokenizer(tiny_zoo):
    a, b = tiny_zoo.folder / ENG / "final", tiny_zoo.folder / DEU / "final"
    english, german = _texts(tiny_zoo, ENG), _texts(tiny_zoo, DEU)
    result = loss_barrier(a, b, {"eng": (english, "a"), "deu": (german, "b")}, ts=[0.25, 0.5, 0.75])
    _identities(result)
    assert list(result.summary["text"]) == ["eng", "deu"]
    summary = result.summary.set_index("text")
    assert summary.loc["eng", "tokenizer"] == str(a) and summary.loc["deu", "tokenizer"] == str(b)
    assert summary.loc["deu", "nll_b"] == _own_nll(b, b, german)  # B on its own language, its own tokenizer
    assert summary.loc["deu", "nll_a"] == _own_nll(a, b, german)  # A scored with B's tokenizer: the definition
    assert summary.loc["eng", "nll_a"] == _own_nll(a, a, english)


def test_refusals(tiny_zoo, tiny_gpt2_path, tiny_llama_path, tmp_path):
    a, b = tiny_zoo.folder / ENG / "step32", tiny_zoo.folder / ENG / "final"
    with pytest.raises(WeightsError, match="route transport"):
        loss_barrier(tiny_gpt2_path, tiny_llama_path, ["one two three"])
    other = tmp_path / "other"
    shutil.copytree(b, other)
    config = json.loads((other / "config.json").read_text())
    config["layer_norm_epsilon"] = 1e-3
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsError, match="configs .* differ in layer_norm_epsilon"):
        loss_barrier(a, other, ["one two three"])
    with pytest.raises(WeightsError, match=r"grid values must be numbers in \[0, 1\]"):
        loss_barrier(a, b, ["one two three"], ts=[0.5, 2])
    with pytest.raises(WeightsError, match="non-empty list of sentences"):
        loss_barrier(a, b, [])
