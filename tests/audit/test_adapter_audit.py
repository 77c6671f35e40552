"""Adapter audit: identity / tiny / active verdicts from the adapter files alone, base checks, broken folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from interlingua.audit import audit_adapter
from interlingua.data.models import ModelSpec

PAIR = "eng_Latn-deu_Latn"


def _paths(zoo):
    return zoo.folder / PAIR / "lora", zoo.folder / PAIR / "lora-identity", zoo.folder / "eng_Latn" / "final"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _rewrite(folder: Path, edit) -> None:
    path = folder / "adapter_model.safetensors"
    tensors = {k: np.array(v) for k, v in load_file(str(path)).items()}
    edit(tensors)
    save_file(tensors, str(path))


def test_identity_adapter_is_identity(tiny_zoo):
    _, identity, base = _paths(tiny_zoo)
    a = audit_adapter(identity, ModelSpec(path=str(base)))
    assert a.verdict == "identity"
    assert a.peft_type == "LORA" and a.r == tiny_zoo.config.lora_r
    assert a.target_modules == sorted(tiny_zoo.config.lora_targets)
    assert a.modules_to_save == []
    assert a.max_abs_b == 0.0 and a.max_abs_delta == 0.0
    assert a.base_check == "matched"
    assert len(a.modules) == 2  # c_attn in each of the tiny preset's 2 blocks


def test_trained_adapter_is_active_and_exact_delta_matches_peft(tiny_zoo):
    trained, _, base = _paths(tiny_zoo)
    a = audit_adapter(trained, ModelSpec(path=str(base)))
    assert a.verdict == "active" and a.delta_method == "exact"
    manifest = tiny_zoo.manifest["adapters"][PAIR]["lora"]
    assert a.max_abs_b == pytest.approx(manifest["max_abs_lora_B"], rel=1e-6)  # float32 -> float64 exactly
    # max|scaling * B @ A| from the file, checked against an independent product
    t = load_file(str(trained / "adapter_model.safetensors"))
    scaling = tiny_zoo.config.lora_alpha / tiny_zoo.config.lora_r
    want = max(
        float(np.abs(scaling * (t[k].astype(np.float64) @ t[k.replace("lora_B", "lora_A")].astype(np.float64))).max())
        for k in t
        if "lora_B" in k
    )
    assert a.max_abs_delta == pytest.approx(want, rel=1e-12)
    for m in a.modules:
        assert m.scaling == scaling and m.method == "exact"


def test_bound_is_an_upper_bound_and_is_labelled(tiny_zoo):
    trained, _, base = _paths(tiny_zoo)
    exact = audit_adapter(trained)
    bound = audit_adapter(trained, exact_limit=0)
    assert bound.delta_method == "bound" and {m.method for m in bound.modules} == {"bound"}
    for e, b in zip(exact.modules, bound.modules):
        assert b.max_abs_delta >= e.max_abs_delta > 0
    assert bound.verdict == "active"


def test_single_nonzero_b_element_is_not_identity(tiny_zoo, tmp_path):
    _, identity, _ = _paths(tiny_zoo)
    folder = _copy(identity, tmp_path / "one")

    def edit(t):
        key = sorted(k for k in t if "lora_B" in k)[-1]
        t[key][3, 1] = 1e-3

    _rewrite(folder, edit)
    a = audit_adapter(folder)
    assert a.verdict == "active"
    assert a.max_abs_b == pytest.approx(1e-3)
    assert sum(m.max_abs_b > 0 for m in a.modules) == 1


def test_tiny_verdict_and_threshold_is_configurable(tiny_zoo, tmp_path):
    trained, _, _ = _paths(tiny_zoo)
    folder = _copy(trained, tmp_path / "tiny")

    def edit(t):
        for k in t:
            if "lora_B" in k:
                t[k] = (t[k] * np.float32(1e-6)).astype(np.float32)

    _rewrite(folder, edit)
    a = audit_adapter(folder)
    assert 0 < a.max_abs_delta < 1e-6 and a.verdict == "tiny"
    assert audit_adapter(folder, tiny_threshold=1e-12).verdict == "active"
    with pytest.raises(ValueError):
        audit_adapter(folder, tiny_threshold=-1.0)


def test_shipped_module_copies_are_never_identity(tiny_zoo, tmp_path):
    _, identity, _ = _paths(tiny_zoo)
    folder = _copy(identity, tmp_path / "mts")
    cfg = json.loads((folder / "adapter_config.json").read_text())
    cfg["modules_to_save"] = ["wte"]
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    a = audit_adapter(folder)
    assert a.verdict == "active" and a.modules_to_save == ["wte"]


def test_base_mismatch_is_reported_not_raised(tiny_zoo):
    trained, _, _ = _paths(tiny_zoo)
    other = tiny_zoo.folder / "deu_Latn" / "final"  # same folder name "final", other weights
    a = audit_adapter(trained, ModelSpec(path=str(other)))
    assert a.base_check == "mismatched"
    assert a.base_recorded.endswith("eng_Latn/final")
    assert audit_adapter(trained).base_check.startswith("not checked")


def test_missing_and_broken_folders_give_verdicts(tiny_zoo, tmp_path):
    trained, _, _ = _paths(tiny_zoo)
    a = audit_adapter(tmp_path / "nowhere")
    assert a.verdict == "missing" and "does not exist" in a.reason

    no_cfg = _copy(trained, tmp_path / "no_cfg")
    (no_cfg / "adapter_config.json").unlink()
    a = audit_adapter(no_cfg)
    assert a.verdict == "missing" and "adapter_config.json" in a.reason

    no_w = _copy(trained, tmp_path / "no_w")
    (no_w / "adapter_model.safetensors").unlink()
    a = audit_adapter(no_w)
    assert a.verdict == "missing" and "no adapter weights" in a.reason and a.r == tiny_zoo.config.lora_r

    damaged = _copy(trained, tmp_path / "damaged")
    (damaged / "adapter_model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    a = audit_adapter(damaged)
    assert a.verdict == "missing" and "unreadable" in a.reason

    bad_cfg = _copy(trained, tmp_path / "bad_cfg")
    (bad_cfg / "adapter_config.json").write_text("[1, 2")
    assert audit_adapter(bad_cfg).verdict == "missing"

    half = _copy(trained, tmp_path / "half")
    _rewrite(half, lambda t: [t.pop(k) for k in [k for k in t if "lora_A" in k][:1]])
    a = audit_adapter(half)
    assert a.verdict == "missing" and "only one of" in a.reason


def test_other_peft_types_are_unsupported(tiny_zoo, tmp_path):
    trained, _, _ = _paths(tiny_zoo)
    folder = _copy(trained, tmp_path / "ia3")
    cfg = json.loads((folder / "adapter_config.json").read_text())
    cfg["peft_type"] = "IA3"
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    assert audit_adapter(folder).verdict == "unsupported"


def test_rank_and_alpha_patterns_set_the_scaling(tiny_zoo, tmp_path):
    trained, _, _ = _paths(tiny_zoo)
    folder = _copy(trained, tmp_path / "pattern")
    cfg = json.loads((folder / "adapter_config.json").read_text())
    cfg["alpha_pattern"] = {"h.1.attn.c_attn": 2 * cfg["r"]}
    cfg["use_rslora"] = False
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    by = {m.module.split(".h.")[1]: m for m in audit_adapter(folder).modules}
    assert by["1.attn.c_attn"].scaling == 2.0
    assert by["0.attn.c_attn"].scaling == cfg["lora_alpha"] / cfg["r"]
    cfg["use_rslora"] = True
    cfg["alpha_pattern"] = {}
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    for m in audit_adapter(folder).modules:
        assert m.scaling == pytest.approx(cfg["lora_alpha"] / np.sqrt(cfg["r"]))
