"""Streamed weight diagnostics against a from-scratch, full-memory torch computation.

Tiny zoo checkpoints (English step32 / final, with step0 as the common base), the tiny
GPT-2 / Llama fixtures for transposed (Conv1D vs Linear) tensors, LoRA adapters against
``PeftModel.merge_and_unload()``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from interlingua.core.schema import column_names
from interlingua.mergeability import WeightsError
from interlingua.mergeability.comparability import read_checkpoint
from interlingua.mergeability.diagnostics import COLUMNS, TensorReader, read_tensor, top_k_mask, weight_diagnostics

ENG = "eng_Latn"


def _zoo(zoo, piece: str) -> Path:
    return zoo.folder / ENG / piece


def _ref_trim_nonzero(t: torch.Tensor, density: float) -> torch.Tensor:
    """Independent TIES trim: a stable descending sort of |t| (ties by lower index), k = max(1, int(density * n))."""
    flat = t.reshape(-1)
    k = max(1, int(density * flat.numel())) if density < 1 else flat.numel()
    mask = torch.zeros_like(flat, dtype=torch.bool)
    mask[torch.argsort(flat.abs(), descending=True, stable=True)[:k]] = True
    return (mask & (flat != 0)).reshape(t.shape)


def _reference(sa, sb, sbase, names, density):
    """Full-memory computation: every tensor of both (and the base) in memory, float64."""
    a = torch.cat([sa[n].double().reshape(-1) for n in names])
    b = torch.cat([sb[n].double().reshape(-1) for n in names])
    out = {
        "dot": float(a @ b),
        "sq_a": float(a @ a),
        "sq_b": float(b @ b),
        "sq_diff": float((a - b) @ (a - b)),
        "cosine": float(torch.nn.functional.cosine_similarity(a, b, dim=0)),
        "rel_l2": float(torch.linalg.norm(a - b) / torch.linalg.norm(b)),
        "norm_ratio": float(torch.linalg.norm(a) / torch.linalg.norm(b)),
    }
    if sbase is not None:
        base = torch.cat([sbase[n].double().reshape(-1) for n in names])
        ta, tb = a - base, b - base
        out["tv_cosine"] = float(torch.nn.functional.cosine_similarity(ta, tb, dim=0))
        out["tv_norm_a"], out["tv_norm_b"] = float(torch.linalg.norm(ta)), float(torch.linalg.norm(tb))
        both = agree = kept_a = 0
        for n in names:
            xa = sa[n].double() - sbase[n].double()
            xb = sb[n].double() - sbase[n].double()
            ka, kb = _ref_trim_nonzero(xa, density), _ref_trim_nonzero(xb, density)
            kept_a += int(ka.sum())
            both += int((ka & kb).sum())
            agree += int((ka & kb & (xa.sign() == xb.sign())).sum())
        out.update(ties_kept_a=kept_a, ties_both=both, ties_agree=agree, ties_sign_agreement=agree / both)
    return out


def _close(x: float, y: float, rel: float = 1e-10) -> bool:
    return math.isclose(x, y, rel_tol=rel, abs_tol=1e-12)


@pytest.fixture(scope="module")
def zoo_diag(tiny_zoo):
    a, b, base = _zoo(tiny_zoo, "step32"), _zoo(tiny_zoo, "final"), _zoo(tiny_zoo, "step0")
    return a, b, base, weight_diagnostics(a, b, base=base, density=0.2)


def test_equals_full_memory_computation(zoo_diag):
    a, b, base, diag = zoo_diag
    assert list(diag.table.columns) == column_names(COLUMNS)
    sa, sb, sbase = (load_file(str(p / "model.safetensors")) for p in (a, b, base))
    names = sorted(sa)
    assert sorted(diag.tensors["name_a"]) == names  # the same architecture: every tensor is shared
    ref = _reference(sa, sb, sbase, names, 0.2)
    g = diag.global_
    for key, value in ref.items():
        assert _close(g[key], value), (key, g[key], value)
    # and each tensor on its own
    for row in diag.tensors.itertuples(index=False):
        one = _reference(sa, sb, sbase, [row.name_a], 0.2)
        for key in ("dot", "sq_diff", "cosine", "rel_l2", "norm_ratio", "tv_cosine", "ties_both", "ties_agree"):
            assert _close(getattr(row, key), one[key]), (row.name_a, key)
    # checkpoints of one run: the trimmed task vectors agree in sign almost everywhere
    assert 0.9 < g["ties_sign_agreement"] <= 1 and g["tv_cosine"] > 0.9


def test_layers_and_global_are_consistent(zoo_diag):
    *_, diag = zoo_diag
    tensors, layers, g = diag.tensors, diag.layers, diag.global_
    assert list(layers["layer"]) == [0, 1, -1]  # blocks, then the tensors outside them
    for col in ("numel", "n_tensors", "ties_kept_a", "ties_kept_b", "ties_both", "ties_agree"):
        assert int(layers[col].sum()) == int(g[col]) == int(tensors[col].sum())
    for col in ("dot", "sq_a", "sq_b", "sq_diff", "tv_dot", "tv_sq_a", "tv_sq_b"):
        assert _close(float(layers[col].sum()), g[col], 1e-12)
        for layer in layers.itertuples(index=False):
            assert _close(float(tensors.loc[tensors["layer"] == layer.layer, col].sum()), getattr(layer, col), 1e-12)
    for row in [*layers.to_dict("records"), g]:  # the derived values follow from the sums
        assert _close(row["cosine"], row["dot"] / math.sqrt(row["sq_a"] * row["sq_b"]))
        assert _close(row["rel_l2"], math.sqrt(row["sq_diff"] / row["sq_b"]))
        assert _close(row["rel_l2_sym"], 2 * math.sqrt(row["sq_diff"]) / (row["norm_a"] + row["norm_b"]))
        assert _close(row["ties_sign_agreement"], row["ties_agree"] / row["ties_both"])


def test_without_base_and_transposed_tensors(tiny_gpt2_path, tiny_llama_path):
    diag = weight_diagnostics(tiny_gpt2_path, tiny_llama_path)
    assert diag.coverage.route == "transport"
    assert diag.tensors["tv_cosine"].isna().all() and (diag.tensors["ties_both"] == -1).all()
    shared = {s.key for s in diag.coverage.shared()}
    assert set(diag.tensors["key"]) == shared
    row = diag.tensors.set_index("key").loc["layers.0.attn.out.weight"]
    sa = load_file(str(tiny_gpt2_path / "model.safetensors"))
    sb = load_file(str(tiny_llama_path / "model.safetensors"))
    a = sa["transformer.h.0.attn.c_proj.weight"].double().T  # Conv1D stores in x out
    b = sb["model.layers.0.self_attn.o_proj.weight"].double()
    assert _close(row["dot"], float((a * b).sum())) and _close(row["sq_diff"], float(((a - b) ** 2).sum()))


def _peft_merged(base: Path, adapter: Path) -> dict[str, torch.Tensor]:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(str(base))
    merged = PeftModel.from_pretrained(lm, str(adapter)).merge_and_unload()
    return {k: v.detach() for k, v in merged.state_dict().items()}


@pytest.mark.parametrize("which", ["fixture", "zoo"])
def test_adapter_merged_on_the_fly_equals_merge_and_unload(which, tiny_gpt2_path, tiny_lora_adapter_path, tiny_zoo):
    if which == "fixture":
        base, adapter, ref = tiny_gpt2_path, tiny_lora_adapter_path, (tiny_gpt2_path, tiny_lora_adapter_path)
    else:
        base, adapter = _zoo(tiny_zoo, "final"), tiny_zoo.folder / f"{ENG}-deu_Latn" / "lora"
        ref = adapter  # the adapter folder alone: its base_model_name_or_path
    expected = _peft_merged(base, adapter)
    ckpt = read_checkpoint(ref)
    assert ckpt.lora  # something is adapted
    with TensorReader(ckpt) as reader:
        for name in ckpt.tensors:
            got = reader.get(name)
            assert got.dtype == expected[name].dtype
            torch.testing.assert_close(got, expected[name], rtol=1e-6, atol=1e-7)
            if name not in ckpt.lora:
                assert torch.equal(got, expected[name])
    # the diagnostics of adapter vs base: only adapted tensors differ, by ||scaling * B A||
    diag = weight_diagnostics(ref, base)
    plain = load_file(str(base / "model.safetensors"))
    lora = load_file(str(adapter / "adapter_model.safetensors"))
    for row in diag.tensors.itertuples(index=False):
        pair = ckpt.lora.get(row.name_a)
        if pair is None:
            assert row.sq_diff == 0 and row.dot == row.sq_a == row.sq_b
            continue
        delta = pair.scaling * (lora[pair.b].double() @ lora[pair.a].double())
        assert _close(row.sq_diff, float((delta**2).sum()), 1e-9)
        assert _close(row.sq_b, float((plain[row.name_b].double() ** 2).sum()))


def test_read_tensor_equals_safe_open(tmp_path, tiny_gpt2_path):
    tensors = {
        "f32": torch.randn(3, 5),
        "bf16": torch.randn(4, 2).to(torch.bfloat16),
        "f16": torch.randn(7).half(),
        "i64": torch.arange(6).reshape(2, 3),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "flag": torch.tensor([True, False]),
    }
    save_file(tensors, str(tmp_path / "model.safetensors"))
    from interlingua.mergeability.comparability import read_tensor_infos

    infos, meta = read_tensor_infos(tmp_path / "model.safetensors")
    assert set(infos) == set(tensors)
    for name, info in infos.items():
        got = read_tensor(info)
        assert got.dtype == tensors[name].dtype and torch.equal(got, tensors[name])
    with safe_open(str(tiny_gpt2_path / "model.safetensors"), "pt") as f, TensorReader(tiny_gpt2_path) as reader:
        for name in f.keys():  # noqa: SIM118 (a safe_open handle is not iterable)
            assert torch.equal(reader.get(name), f.get_tensor(name))


def test_top_k_mask_ties_by_lower_index():
    values = torch.tensor([1.0, 3.0, 2.0, 3.0, 2.0, 2.0])
    assert top_k_mask(values, 3).tolist() == [False, True, True, True, False, False]
    assert top_k_mask(values, 0).sum() == 0 and top_k_mask(values, 9).all()
    with pytest.raises(WeightsError, match="NaN or infinite"):
        top_k_mask(torch.tensor([1.0, float("nan"), 2.0]), 1)


def test_bracketed_selection_equals_a_stable_sort(monkeypatch):
    """The k-th largest via a sample bracket (small sample and blocks here, so every path runs)."""
    from interlingua.mergeability import diagnostics

    monkeypatch.setattr(diagnostics, "_SAMPLE", 64)
    monkeypatch.setattr(diagnostics, "_CHUNK", 1000)
    gen = torch.Generator().manual_seed(0)
    for trial in range(300):
        n = int(torch.randint(1, 20000, (1,), generator=gen))
        x = torch.randn(n, generator=gen, dtype=torch.float64)
        if trial % 2 == 0:
            x = x.abs()
        if trial % 3 == 0:
            x = torch.round(x * 10) / 10  # many ties
        if trial % 5 == 0:
            x[: n // 2] = 0
        k = int(torch.randint(1, n + 1, (1,), generator=gen))
        expected = torch.zeros(n, dtype=torch.bool)
        expected[torch.argsort(x, descending=True, stable=True)[:k]] = True
        assert torch.equal(top_k_mask(x, k), expected), (trial, n, k)


def test_bad_inputs(zoo_diag, tiny_gpt2_path, tiny_goldfish_path, tiny_bert_path):
    a, b, base, _ = zoo_diag
    for density in (0, 1.5, True, "x"):
        with pytest.raises(WeightsError, match="density"):
            weight_diagnostics(a, b, base=base, density=density)
    with pytest.raises(WeightsError, match="base .* does not share"):
        weight_diagnostics(tiny_gpt2_path, tiny_gpt2_path, base=tiny_goldfish_path)  # vocabulary rows differ
    with pytest.raises(WeightsError, match="not shared tensors"):
        weight_diagnostics(a, b, keys=["layers.9.attn.qkv.weight"])
    one = weight_diagnostics(a, b, keys=["layers.0.attn.qkv.weight"])
    assert len(one.tensors) == 1 and one.global_["numel"] == one.tensors["numel"].iloc[0]
