"""Comparability: the route and the coverage table of two checkpoints, read from headers only.

Tiny checkpoints of the session fixtures (tests/fixtures/tiny_models.py) and a few
randomly initialised ones built here from a config (no tokenizer: the table needs none).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors import safe_open

from interlingua.core.schema import column_names
from interlingua.mergeability import WeightsError
from interlingua.mergeability.comparability import COLUMNS, REASONS, comparability, read_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def _names(folder: Path) -> set[str]:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return set(f.keys())


def _every_tensor_once(cov, a: Path, b: Path) -> None:
    t = cov.table
    names_a = [n for n in t["name_a"] if n]
    names_b = [n for n in t["name_b"] if n]
    assert sorted(names_a) == sorted(_names(a)) and len(names_a) == len(set(names_a))
    assert sorted(names_b) == sorted(_names(b)) and len(names_b) == len(set(names_b))
    assert set(t["status"]) <= {"shared", "excluded"}
    assert (t.loc[t["status"] == "shared", "reason"] == "").all()
    excluded = t[t["status"] == "excluded"]
    assert excluded["reason"].isin(list(REASONS)).all() and (excluded["detail"] != "").all()


def _save(folder: Path, kind: str, **overrides) -> Path:
    """A randomly initialised tiny model saved with save_pretrained (no tokenizer)."""
    import torch
    import transformers

    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(
            **{"vocab_size": 50, "n_positions": 16, "n_embd": 16, "n_layer": 2, "n_head": 2, **overrides}
        )
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(
            **{
                "vocab_size": 50,
                "hidden_size": 16,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "intermediate_size": 32,
                "max_position_embeddings": 16,
                **overrides,
            }
        )
        model = transformers.LlamaForCausalLM(cfg)
    model.save_pretrained(folder)
    return folder


def test_table_schema_and_same_model(tiny_gpt2_path):
    cov = comparability(tiny_gpt2_path, tiny_gpt2_path)
    assert list(cov.table.columns) == column_names(COLUMNS)
    assert cov.route == "native"
    assert (cov.table["status"] == "shared").all() and len(cov.table) == len(_names(tiny_gpt2_path))
    assert (cov.table["name_a"] == cov.table["name_b"]).all()
    assert cov.counts() == {"shared": len(cov.table), "excluded": 0}
    assert json.dumps(cov.to_dict())  # JSON-able


def test_native_with_vocabulary_rows_excluded(tiny_gpt2_path, tiny_goldfish_path):
    cov = comparability(tiny_gpt2_path, tiny_goldfish_path)
    assert cov.route == "native", cov.reason
    _every_tensor_once(cov, tiny_gpt2_path, tiny_goldfish_path)
    excluded = cov.table[cov.table["status"] == "excluded"]
    assert list(excluded["key"]) == ["embed.tokens.weight"]
    row = excluded.iloc[0]
    assert row["reason"] == "vocab_rows_differ" and "A 400, B 256" in row["detail"]
    assert row["name_a"] == row["name_b"] == "transformer.wte.weight"
    assert [s.name_a for s in cov.shared()] == list(cov.table.loc[cov.table["status"] == "shared", "name_a"])


def test_gpt2_against_llama_key_map(tiny_gpt2_path, tiny_llama_path):
    cov = comparability(tiny_gpt2_path, tiny_llama_path)
    _every_tensor_once(cov, tiny_gpt2_path, tiny_llama_path)
    assert cov.route == "transport" and "families differ" in cov.reason
    t = cov.table.set_index("key")
    # fused (GPT-2 c_attn, Conv1D) vs split (q_proj, k_proj, v_proj): not comparable
    qkv = t.loc["layers.0.attn.qkv.weight"]
    assert (qkv["name_a"], qkv["name_b"], qkv["reason"]) == (
        "transformer.h.0.attn.c_attn.weight",
        "",
        "fused_vs_split_qkv",
    )
    assert (qkv["layout_a"], qkv["fused_a"], qkv["shape_a"], qkv["canonical_shape_a"]) == (
        "conv1d",
        "qkv-blocks",
        "32x96",
        "96x32",
    )
    for proj in ("q", "k", "v"):
        row = t.loc[f"layers.0.attn.{proj}.weight"]
        assert row["name_b"] == f"model.layers.0.self_attn.{proj}_proj.weight" and row["name_a"] == ""
        assert row["reason"] == "fused_vs_split_qkv"
    # the output projection is the same quantity: Conv1D (in x out) against Linear (out x in)
    out = t.loc["layers.0.attn.out.weight"]
    assert out["status"] == "shared" and (out["layout_a"], out["layout_b"]) == ("conv1d", "linear")
    assert out["name_b"] == "model.layers.0.self_attn.o_proj.weight"
    assert t.loc["layers.0.norm_mlp.weight", "name_b"] == "model.layers.0.post_attention_layernorm.weight"
    assert t.loc["layers.0.mlp.up.weight", "reason"] == "ffn_width_differs"
    assert t.loc["layers.0.mlp.gate.weight", "reason"] == "no_counterpart"
    assert t.loc["layers.0.attn.out.bias", "reason"] == "no_counterpart"
    assert t.loc["embed.positions.weight", "reason"] == "no_counterpart"
    # llama has 3 blocks, the GPT-2 2
    depth = t[t["reason"] == "depth_differs"]
    assert set(depth["layer"]) == {2} and len(depth) == 9 and "A has 2 blocks" in depth["detail"].iloc[0]
    assert (t.loc[t["layer"] == 2, "reason"] == "depth_differs").all()
    # the GPT-2 ties its head: llama's lm_head has no counterpart for that reason
    head = t.loc["head.weight"]
    assert (head["name_a"], head["name_b"], head["reason"]) == ("", "lm_head.weight", "tied_embeddings")
    assert t.loc["embed.tokens.weight", "status"] == "shared"


def test_fused_layouts_differ_gpt2_neox(tiny_gpt2_path, tiny_gpt_neox_path):
    cov = comparability(tiny_gpt2_path, tiny_gpt_neox_path)
    _every_tensor_once(cov, tiny_gpt2_path, tiny_gpt_neox_path)
    t = cov.table.set_index("key")
    assert t.loc["layers.1.attn.qkv.weight", "reason"] == "fused_layout_differs"
    assert t.loc["layers.1.attn.qkv.weight", "fused_b"] == "qkv-per-head"
    assert t.loc["layers.1.attn.out.weight", "status"] == "shared"
    assert t.loc["head.weight", "reason"] == "tied_embeddings" and t.loc["head.weight", "name_b"] == "embed_out.weight"


def test_grouped_query_heads(tmp_path):
    a = _save(tmp_path / "kv2", "llama", num_key_value_heads=2)
    b = _save(tmp_path / "kv4", "llama", num_key_value_heads=4)
    cov = comparability(a, b)
    _every_tensor_once(cov, a, b)
    assert cov.route == "transport"
    t = cov.table
    gqa = t[t["reason"] == "grouped_query_heads"]
    assert sorted(gqa["key"]) == sorted(f"layers.{i}.attn.{p}.weight" for i in (0, 1) for p in ("k", "v"))
    assert "A 2 x 4, B 4 x 4" in gqa["detail"].iloc[0]
    assert (t.loc[~t["key"].isin(gqa["key"]), "status"] == "shared").all()


def test_width_and_depth(tmp_path):
    base = _save(tmp_path / "base", "gpt2")
    wide = _save(tmp_path / "wide", "gpt2", n_embd=32)
    deep = _save(tmp_path / "deep", "gpt2", n_layer=3)
    cov = comparability(base, wide)
    _every_tensor_once(cov, base, wide)
    assert cov.route == "transport"
    t = cov.table.set_index("key")
    assert t.loc["layers.0.attn.qkv.weight", "reason"] == "width_differs"
    assert "hidden width A 16, B 32" in t.loc["layers.0.attn.qkv.weight", "detail"]
    assert t.loc["embed.tokens.weight", "reason"] == "width_differs"
    cov = comparability(deep, base)
    _every_tensor_once(cov, deep, base)
    assert cov.route == "transport"
    t = cov.table
    assert set(t.loc[t["status"] == "excluded", "reason"]) == {"depth_differs"}
    assert set(t.loc[t["status"] == "excluded", "layer"]) == {2}
    assert (t.loc[t["layer"] < 2, "status"] == "shared").all()


def test_untied_head_same_family(tmp_path):
    tied = _save(tmp_path / "tied", "llama", tie_word_embeddings=True)
    untied = _save(tmp_path / "untied", "llama", tie_word_embeddings=False)
    assert "lm_head.weight" not in _names(tied) and "lm_head.weight" in _names(untied)
    cov = comparability(untied, tied)
    assert cov.route == "native"  # head rows do not break the route
    t = cov.table.set_index("key")
    assert t.loc["head.weight", "reason"] == "tied_embeddings" and t.loc["head.weight", "name_a"] == "lm_head.weight"


def test_multimodal_text_stack_and_encoder(tiny_gemma3_path, tiny_gemma3_text_path, tiny_bert_path, tiny_gpt2_path):
    cov = comparability(tiny_gemma3_path, tiny_gemma3_text_path)
    _every_tensor_once(cov, tiny_gemma3_path, tiny_gemma3_text_path)
    assert cov.route == "native", cov.reason
    t = cov.table
    vision = t[t["part"] == "vision"]
    assert len(vision) > 0 and (vision["reason"] == "no_counterpart").all() and (vision["name_b"] == "").all()
    assert set(t.loc[t["part"] != "vision", "status"]) == {"shared"}
    norms = t.set_index("key")
    assert norms.loc["layers.0.norm_mlp.weight", "name_b"] == "model.layers.0.pre_feedforward_layernorm.weight"
    assert norms.loc["layers.0.norm_attn_out.weight", "name_b"] == "model.layers.0.post_attention_layernorm.weight"
    cov = comparability(tiny_bert_path, tiny_gpt2_path)
    _every_tensor_once(cov, tiny_bert_path, tiny_gpt2_path)
    assert cov.route == "none" and "encoder" in cov.reason


def test_adapter_stands_for_its_base(tiny_gpt2_path, tiny_llama_path, tiny_lora_adapter_path, tmp_path):
    cov = comparability(tiny_lora_adapter_path, tiny_gpt2_path)
    assert cov.route == "native" and (cov.table["status"] == "shared").all()
    ckpt = read_checkpoint((tiny_gpt2_path, tiny_lora_adapter_path))
    assert sorted(ckpt.lora) == ["transformer.h.0.attn.c_attn.weight", "transformer.h.1.attn.c_attn.weight"]
    pair = ckpt.lora["transformer.h.0.attn.c_attn.weight"]
    assert pair.transpose and pair.scaling == 8 / 4
    # unsupported adapters are refused with what to do
    bad = tmp_path / "dora"
    bad.mkdir()
    for f in tiny_lora_adapter_path.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    config = json.loads((bad / "adapter_config.json").read_text())
    config["use_dora"] = True
    (bad / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsError, match="DoRA.*merge_and_unload"):
        read_checkpoint((tiny_gpt2_path, bad))
    with pytest.raises(WeightsError, match="another base"):
        read_checkpoint((tiny_llama_path, tiny_lora_adapter_path))


def test_bad_inputs(tmp_path, tiny_gpt2_path):
    from fixtures.tiny_models import write_pickle_weights

    with pytest.raises(WeightsError, match="does not exist"):
        comparability(tmp_path / "nope", tiny_gpt2_path)
    pickled = write_pickle_weights(tiny_gpt2_path, tmp_path / "pickled")
    with pytest.raises(WeightsError, match="no safetensors.*safe_serialization"):
        comparability(pickled, tiny_gpt2_path)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_text((tiny_gpt2_path / "config.json").read_text())
    (damaged / "model.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(WeightsError, match="not a readable safetensors"):
        comparability(damaged, tiny_gpt2_path)


@pytest.mark.slow
def test_reads_headers_only(tiny_gpt2_path, tiny_llama_path):
    """The table comes from the headers: computing it imports no torch."""
    code = (
        "import sys, builtins\n"
        "from interlingua.mergeability.comparability import comparability\n"
        f"cov = comparability({str(tiny_gpt2_path)!r}, {str(tiny_llama_path)!r})\n"
        "print(len(cov.table), 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    n, torch_loaded = out.stdout.split()
    assert int(n) > 0 and torch_loaded == "False"
