"""One architecture table: extraction, transport and weight comparability all read ARCHITECTURES.

A family is added once, with ``register_architecture``; its entry is what
``resolve_architecture`` (extraction), ``resolve_blocks`` (transport) and
``comparability`` (weights) see. Entries without module paths (families no test
model covers) are extracted by introspection, as a family outside the table is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlingua.data.models import ARCHITECTURES, ArchitectureEntry, ModelSpec, register_architecture
from interlingua.data.models.keymap import FALLBACK_RULES, LLAMA_RULES
from interlingua.data.models.preflight import _check_config
from interlingua.data.models.table import Sublayers
from interlingua.mergeability.comparability import _facts, _map_all, comparability, family_rules, read_checkpoint
from interlingua.transport.correspond import resolve_blocks
from interlingua.transport.errors import TransportError

_TOY = "toyllama"
_TOY_SUBLAYERS = Sublayers(
    {"in": "mlp.gate_proj", "up": "mlp.up_proj"},
    "mlp.down_proj",
    "self_attn.o_proj",
    ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
)


@pytest.fixture()
def llama_lm(tiny_llama_path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_llama_path)


@pytest.fixture()
def unregister() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for model_type in added:
        ARCHITECTURES.pop(model_type, None)


def _as(lm, model_type: str):
    lm.config.model_type = model_type
    return lm


def _facts_as(path: Path, model_type: str):
    ckpt = read_checkpoint(path)
    ckpt = dataclasses.replace(ckpt, config={**ckpt.config, "model_type": model_type})
    return ckpt, _facts(ckpt, _map_all(ckpt))


def test_every_entry_is_what_each_reader_uses() -> None:
    """Per family, the three readers' facts are the entry's fields (nothing kept elsewhere)."""
    for model_type, entry in ARCHITECTURES.items():
        family = ARCHITECTURES[entry.compared_as] if entry.compared_as else entry
        assert family_rules(model_type) is family.tensor_rules, model_type
        cfg = {"model_type": model_type, "num_hidden_layers": 2}
        found = _check_config(ModelSpec(path="unused"), cfg, "config.json")["architecture"]
        assert found == ("table" if entry.extracts else "introspection"), model_type
    assert ARCHITECTURES["bert"].sublayers is None and not ARCHITECTURES["bert"].causal
    assert ARCHITECTURES["gemma3"].compared_as == "gemma3_text"
    # the families no tiny test model covers keep no module paths (extraction introspects them, as before)
    for model_type in ("qwen2", "qwen3", "gemma", "gemma2", "mixtral"):
        assert not ARCHITECTURES[model_type].extracts, model_type


def test_a_family_registered_once_is_seen_by_all_three(llama_lm, tiny_llama_path: Path, unregister) -> None:
    from interlingua.data.models.architectures import resolve_architecture

    lm = _as(llama_lm, _TOY)
    # before: transport refuses it, comparability has no key map for it, extraction introspects it
    with pytest.raises(TransportError, match=r"no shared interface: model_type 'toyllama' has no sublayers"):
        resolve_blocks(lm)
    _, before = _facts_as(tiny_llama_path, _TOY)
    assert not before.mapped and before.kind == "decoder"  # the kind from LlamaForCausalLM
    assert resolve_architecture(lm, lm.config).source == "introspection"

    register_architecture(
        ArchitectureEntry(
            _TOY, "embed_tokens", "layers", "norm", True, sublayers=_TOY_SUBLAYERS, tensor_rules=LLAMA_RULES
        )
    )
    unregister.append(_TOY)
    arch = resolve_architecture(lm, lm.config)
    assert arch.source == "table" and arch.num_blocks == 3
    sublayers, blocks, _ = resolve_blocks(lm)
    assert sublayers is _TOY_SUBLAYERS and len(blocks) == 3
    assert blocks[0].mlp_out is arch.blocks[0].get_submodule("mlp.down_proj")
    ckpt, after = _facts_as(tiny_llama_path, _TOY)
    assert after.family == _TOY and after.mapped and after.kind == "decoder"
    result = comparability(ckpt, ckpt)
    assert result.route == "native" and result.counts()["excluded"] == 0

    with pytest.raises(ValueError, match="already in the architecture table"):
        register_architecture(ArchitectureEntry(_TOY, tensor_rules=LLAMA_RULES))
    # an encoder entry: comparability reads its kind from the same entry's `causal`
    register_architecture(ArchitectureEntry(_TOY, causal=False, tensor_rules=LLAMA_RULES), overwrite=True)
    assert _facts_as(tiny_llama_path, _TOY)[1].kind == "encoder"
    with pytest.raises(TransportError, match="has no sublayers"):
        resolve_blocks(lm)


@pytest.mark.slow
def test_an_entry_without_module_paths_is_introspected_as_before(llama_lm, tiny_llama_path: Path) -> None:
    """qwen2's entry has sublayers and a key map but no module paths: extraction introspects it."""
    from interlingua.data.models.architectures import resolve_architecture

    lm = _as(llama_lm, "qwen2")
    assert resolve_architecture(lm, lm.config).source == "introspection"
    sublayers, blocks, _ = resolve_blocks(lm)
    assert sublayers is ARCHITECTURES["qwen2"].sublayers and len(blocks) == 3
    _, facts = _facts_as(tiny_llama_path, "qwen2")
    assert facts.mapped and family_rules("qwen2") is LLAMA_RULES
    assert family_rules("t5") is None and FALLBACK_RULES  # not in the table: the Llama fallback, unmapped


def test_a_partial_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="gives only some of embedding, blocks"):
        ArchitectureEntry("half", embedding="wte")
    with pytest.raises(ValueError, match="gives only some of embedding, blocks"):
        ArchitectureEntry("half", "wte", "h", "ln_f")


def test_a_family_with_a_gated_branch_in_its_sublayers_is_gated_for_the_cost_model() -> None:
    """``gated_mlp`` (three hidden x ffn matrices per block, counted by the cost model) agrees with the sublayers
    transport reads wherever the table gives both: an ``up`` branch is the gated MLP's linear branch."""
    from interlingua.data.models.table import gated_mlp

    given = {t: e for t, e in ARCHITECTURES.items() if e.sublayers is not None}
    assert given
    for t, e in given.items():
        assert e.gated_mlp == ("up" in e.sublayers.mlp_in), t
        assert gated_mlp(t) == e.gated_mlp
    assert not gated_mlp("no-such-family")


def test_one_reader_of_depth_and_width_for_a_config_dict_or_object(tiny_gpt2_path: Path, tiny_llama_path: Path):
    """``config_int`` reads GPT-2's and Llama's spellings from config.json, a multimodal model's text_config over
    its top level, and a loaded config's attributes alike; pre-flight's depth and the cost model's agree with it."""
    import json
    from types import SimpleNamespace

    from interlingua.data.models.table import config_int
    from interlingua.pipeline.cost import model_shape

    for path in (tiny_gpt2_path, tiny_llama_path):
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        layers, hidden = config_int(cfg, "layers"), config_int(cfg, "hidden")
        assert isinstance(layers, int) and isinstance(hidden, int)
        shape = model_shape({"folder": str(path)})
        assert (shape.layers, shape.hidden) == (layers, hidden)
        assert _check_config(ModelSpec(path=str(path)), cfg, "config.json")["num_layers"] == layers
    assert config_int({"n_layer": 3, "text_config": {"num_hidden_layers": 5}}, "layers") == 5
    assert config_int({"n_embd": True}, "hidden") is None  # a flag is not a width
    assert config_int(SimpleNamespace(n_embd=48), "hidden") == 48
