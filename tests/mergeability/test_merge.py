"""Merge operators: against mergekit's outputs (when installed) and an independent float64
implementation of the published formulas (always); model builds on the tiny zoo.

mergekit is compared on whole models (``run_merge`` on tiny zoo checkpoints: linear, slerp,
task arithmetic, TIES) and, for DARE (random masks), tensor by tensor with mergekit's global
RNG seeded with the seed interlingua uses for that tensor (``dare_seed``). Agreement is to
float32 rounding: mergekit computes in the inputs' float32, interlingua in float64.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interlingua.mergeability import WeightsError
from interlingua.mergeability.merge import (
    MERGE_FILE,
    build_merge,
    dare_seed,
    merge_recipe,
    merge_recipe_key,
    merge_tensors,
)

ENG = "eng_Latn"
F32_TOL = dict(rtol=1e-6, atol=1e-6)


def _piece(zoo, name: str) -> Path:
    return zoo.folder / ENG / name


# ====================================================================== reference formulas (independent)
def _ref_trim(d: torch.Tensor, density: float) -> torch.Tensor:
    if density >= 1:
        return d
    k = max(1, int(density * d.numel()))
    mask = torch.zeros(d.numel(), dtype=torch.float64)
    mask[torch.argsort(d.abs().reshape(-1), descending=True, stable=True)[:k]] = 1  # ties: lower index
    return d * mask.reshape(d.shape)


def _ref_dare(d: torch.Tensor, density: float, gen: torch.Generator) -> torch.Tensor:
    keep = torch.bernoulli(torch.full(d.shape, density, dtype=torch.float32), generator=gen).double()
    masked = d * keep
    return masked * (d.abs().sum() / masked.abs().sum())


def _reference(method: str, xs, base=None, *, weights=None, t=None, density=None, lam=1.0, gen=None):
    xs = [x.double() for x in xs]
    if method == "linear":
        return sum(w * x for w, x in zip(weights, xs)) / sum(weights)
    if method == "slerp":
        a, b = xs
        u, v = a / a.norm(), b / b.norm()
        theta = math.acos(float((u * v).sum()))
        return (math.sin((1 - t) * theta) * a + math.sin(t * theta) * b) / math.sin(theta)
    base = base.double()
    deltas = [x - base for x in xs]
    if method == "ties":
        deltas = [_ref_trim(d, p) for d, p in zip(deltas, density)]
    if method.startswith("dare"):
        deltas = [_ref_dare(d, p, gen) for d, p in zip(deltas, density)]
    weighted = [w * d for w, d in zip(weights, deltas)]
    if method in ("ties", "dare_ties"):
        sign = torch.where(sum(weighted) >= 0, 1.0, -1.0).double()
        agree = [(d.sign() == sign).double() for d in weighted]
        mixed = sum(a * d for a, d in zip(agree, weighted))
        if method == "ties":  # normalised by the agreeing weights
            div = sum(w * a for w, a in zip(weights, agree))
            mixed = mixed / torch.where(div == 0, 1.0, div)
        return base + lam * mixed
    return base + lam * sum(weighted)


@pytest.fixture
def tensors():
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(24, 16, generator=gen)
    return base, [base + 0.05 * torch.randn(24, 16, generator=gen) for _ in range(3)]


@pytest.mark.parametrize(
    "method, params, ref",
    [
        ("linear", dict(weights=[0.2, 0.3, 0.5]), dict(weights=[0.2, 0.3, 0.5])),
        ("task_arithmetic", dict(weights=[0.6, 0.8, 0.5], lambda_=0.7), dict(weights=[0.6, 0.8, 0.5], lam=0.7)),
        (
            "ties",
            dict(weights=[0.6, 0.4, 1.0], density=[0.3, 0.5, 0.7]),
            dict(weights=[0.6, 0.4, 1.0], density=[0.3, 0.5, 0.7]),
        ),
        (
            "dare_linear",
            dict(weights=[0.6, 0.4, 1.0], density=0.5, seed=5),
            dict(weights=[0.6, 0.4, 1.0], density=[0.5] * 3),
        ),
        (
            "dare_ties",
            dict(weights=[0.6, 0.4, 1.0], density=[0.4, 0.6, 0.8], seed=5, lambda_=1.3),
            dict(weights=[0.6, 0.4, 1.0], density=[0.4, 0.6, 0.8], lam=1.3),
        ),
    ],
)
def test_operators_follow_the_formulas(tensors, method, params, ref):
    base, xs = tensors
    recipe = merge_recipe(method, 3, has_base=method != "linear", **params)
    seed = dare_seed(5, "w")
    got = merge_tensors(recipe, xs, None if method == "linear" else base, generator=torch.Generator().manual_seed(seed))
    expected = _reference(method, xs, base, gen=torch.Generator().manual_seed(seed), **ref)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_slerp_formula_and_endpoints(tensors):
    _, (a, b, _) = tensors
    for t in (0.0, 0.3, 1.0):
        got = merge_tensors(merge_recipe("slerp", 2, has_base=False, t=t), [a, b])
        torch.testing.assert_close(got, _reference("slerp", [a, b], t=t), rtol=1e-12, atol=1e-12)
    assert torch.equal(merge_tensors(merge_recipe("slerp", 2, has_base=False, t=0.0), [a, b]), a.double())
    # (nearly) collinear tensors: the lerp
    got = merge_tensors(merge_recipe("slerp", 2, has_base=False, t=0.25), [a, 2 * a])
    torch.testing.assert_close(got, 0.75 * a.double() + 0.25 * 2 * a.double())


def test_dare_masks_are_seeded_per_tensor(tensors):
    base, xs = tensors
    recipe = merge_recipe("dare_linear", 3, has_base=True, density=0.5, seed=1)
    one = merge_tensors(recipe, xs, base, generator=torch.Generator().manual_seed(dare_seed(1, "x")))
    again = merge_tensors(recipe, xs, base, generator=torch.Generator().manual_seed(dare_seed(1, "x")))
    other = merge_tensors(recipe, xs, base, generator=torch.Generator().manual_seed(dare_seed(1, "y")))
    assert torch.equal(one, again) and not torch.equal(one, other)
    assert dare_seed(1, "x") != dare_seed(2, "x") and 0 <= dare_seed(1, "x") < 2**63


# ====================================================================== against mergekit
@pytest.fixture(scope="module")
def mergekit_api():
    pytest.importorskip("mergekit", reason="mergekit is not installed (pip install mergekit==0.1.5)")
    from mergekit.config import MergeConfiguration
    from mergekit.merge import run_merge
    from mergekit.merge_methods import merge_tensors as mk_merge_tensors
    from mergekit.options import MergeOptions

    def run(config: dict, out: Path) -> dict[str, torch.Tensor]:
        run_merge(
            MergeConfiguration.model_validate({**config, "dtype": "float32"}),
            str(out),
            MergeOptions(quiet=True, copy_tokenizer=False, write_model_card=False),
        )
        return load_file(str(out / "model.safetensors"))

    return run, mk_merge_tensors


def _models(zoo):
    return [_piece(zoo, s) for s in ("step16", "step32", "final")]


CASES = {
    "linear": (
        dict(weights=[0.2, 0.3, 0.5]),
        lambda m, b: {
            "merge_method": "linear",
            "models": [{"model": str(p), "parameters": {"weight": w}} for p, w in zip(m, [0.2, 0.3, 0.5])],
        },
    ),
    "slerp": (
        dict(t=0.3),
        lambda m, b: {
            "merge_method": "slerp",
            "base_model": str(m[0]),
            "models": [{"model": str(m[0])}, {"model": str(m[1])}],
            "parameters": {"t": 0.3},
        },
    ),
    "task_arithmetic": (
        dict(weights=[0.6, 0.8, 0.5], lambda_=0.7),
        lambda m, b: {
            "merge_method": "task_arithmetic",
            "base_model": str(b),
            "parameters": {"lambda": 0.7},
            "models": [{"model": str(p), "parameters": {"weight": w}} for p, w in zip(m, [0.6, 0.8, 0.5])],
        },
    ),
    "ties": (
        dict(weights=[0.6, 0.4, 1.0], density=[0.3, 0.5, 0.7]),
        lambda m, b: {
            "merge_method": "ties",
            "base_model": str(b),
            "models": [
                {"model": str(p), "parameters": {"weight": w, "density": d}}
                for p, w, d in zip(m, [0.6, 0.4, 1.0], [0.3, 0.5, 0.7])
            ],
        },
    ),
}


@pytest.mark.parametrize("method", list(CASES))
def test_build_equals_mergekit(method, tiny_zoo, tmp_path, mergekit_api):
    run, _ = mergekit_api
    params, config = CASES[method]
    models, base = _models(tiny_zoo), _piece(tiny_zoo, "step0")
    models = models[:2] if method == "slerp" else models
    build_merge(
        models, tmp_path / "ours", method=method, base=None if method in ("linear", "slerp") else base, **params
    )
    ours = load_file(str(tmp_path / "ours" / "model.safetensors"))
    theirs = run(config(models, base), tmp_path / "mergekit")
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert ours[name].dtype == theirs[name].dtype
        torch.testing.assert_close(ours[name], theirs[name], **F32_TOL)


@pytest.mark.parametrize("method", ["dare_linear", "dare_ties"])
def test_dare_tensors_equal_mergekit_with_the_same_seed(method, tiny_zoo, mergekit_api):
    _, mk_merge_tensors = mergekit_api
    models = [load_file(str(p / "model.safetensors")) for p in _models(tiny_zoo)]
    base = load_file(str(_piece(tiny_zoo, "step0") / "model.safetensors"))
    weights, density = [0.6, 0.4, 1.0], [0.4, 0.6, 0.8]
    recipe = merge_recipe(method, 3, has_base=True, weights=weights, density=density, seed=11)
    for name in ("transformer.h.0.attn.c_attn.weight", "transformer.wte.weight", "transformer.ln_f.bias"):
        torch.manual_seed(dare_seed(11, name))  # mergekit draws its masks from the global generator
        theirs = mk_merge_tensors(
            [base[name], *(m[name] for m in models)],
            method,
            base_index=0,
            parameters={"weight": dict(enumerate(weights, 1)), "density": dict(enumerate(density, 1))},
        )
        ours = merge_tensors(
            recipe, [m[name] for m in models], base[name], generator=torch.Generator().manual_seed(dare_seed(11, name))
        )
        torch.testing.assert_close(ours.float(), theirs, **F32_TOL)


# ====================================================================== model builds
def test_build_writes_a_loadable_model(tiny_zoo, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    models, base = _models(tiny_zoo), _piece(tiny_zoo, "step0")
    out = tmp_path / "ties"
    record = build_merge(models, out, method="ties", base=base, weights=[0.6, 0.4, 1.0], density=[0.3, 0.5, 0.7])
    assert record["key"] == merge_recipe_key(
        models, method="ties", base=base, weights=[0.6, 0.4, 1.0], density=[0.3, 0.5, 0.7]
    )
    assert record["recipe"] == {
        "method": "ties",
        "weights": [0.6, 0.4, 1.0],
        "density": [0.3, 0.5, 0.7],
        "lambda": 1.0,
        "normalize": True,
    }
    assert json.loads((out / MERGE_FILE).read_text()) == record
    for name, digest in record["files"].items():  # the weights' hash was taken while writing them
        assert digest == hashlib.sha256((out / name).read_bytes()).hexdigest()
    lm = AutoModelForCausalLM.from_pretrained(str(out))
    assert lm.get_output_embeddings().weight.data_ptr() == lm.get_input_embeddings().weight.data_ptr()  # still tied
    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.get_vocab() == AutoTokenizer.from_pretrained(str(models[0])).get_vocab()
    merged = load_file(str(out / "model.safetensors"))
    loaded = [load_file(str(p / "model.safetensors")) for p in models]
    sbase = load_file(str(base / "model.safetensors"))
    for name, value in merged.items():  # the independent formula, tensor by tensor
        expected = _reference(
            "ties", [m[name] for m in loaded], sbase[name], weights=[0.6, 0.4, 1.0], density=[0.3, 0.5, 0.7]
        )
        torch.testing.assert_close(value, expected.float(), rtol=0, atol=0)


def test_lerp_endpoint_is_the_model_exactly(tiny_zoo, tmp_path):
    a, b = _piece(tiny_zoo, "step32"), _piece(tiny_zoo, "final")
    build_merge([a, b], tmp_path / "lerp", method="linear", weights=[1, 0])
    got, want = load_file(str(tmp_path / "lerp" / "model.safetensors")), load_file(str(a / "model.safetensors"))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)


def test_no_overwrite_rebuild_noop_and_key(tiny_zoo, tmp_path):
    a, b = _piece(tiny_zoo, "step32"), _piece(tiny_zoo, "final")
    out = tmp_path / "m"
    first = build_merge([a, b], out, method="slerp", t=0.5)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert build_merge([a, b], out, method="slerp", t=0.5) == first  # identical: a no-op
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(WeightsError, match="exists and holds something other"):
        build_merge([a, b], out, method="slerp", t=0.25)
    (out / "model.safetensors").write_bytes(b"damaged")
    with pytest.raises(WeightsError, match="exists and holds something other"):
        build_merge([a, b], out, method="slerp", t=0.5)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert build_merge([a, b], empty, method="slerp", t=0.5)["key"] == first["key"]
    # the key: the files, not the folder names; the order of the models counts
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    assert merge_recipe_key([copy, b], method="slerp", t=0.5) == first["key"]
    assert merge_recipe_key([b, a], method="slerp", t=0.5) != first["key"]
    assert merge_recipe_key([a, b], method="linear") == merge_recipe_key([a, b], method="linear", weights=[1, 1])
    assert merge_recipe_key([a, b], method="linear") != merge_recipe_key([a, b], method="linear", normalize=False)


def test_interrupted_build_leaves_nothing(tiny_zoo, tmp_path, monkeypatch):
    from interlingua.mergeability import merge as merge_module

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(merge_module, "_write_streamed", boom)
    with pytest.raises(KeyboardInterrupt):
        build_merge([_piece(tiny_zoo, "step32"), _piece(tiny_zoo, "final")], tmp_path / "m", method="linear")
    assert list(tmp_path.iterdir()) == []


def test_adapter_inputs_are_merged_into_their_base(tiny_zoo, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    final, lora = _piece(tiny_zoo, "final"), tiny_zoo.folder / f"{ENG}-deu_Latn" / "lora"
    build_merge([lora, final], tmp_path / "m", method="linear", weights=[1, 0])
    got = load_file(str(tmp_path / "m" / "model.safetensors"))
    want = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(final)), str(lora)).merge_and_unload()
    want = want.state_dict()
    for name, value in got.items():
        torch.testing.assert_close(value, want[name], rtol=1e-6, atol=1e-7)


def test_refusals(tiny_zoo, tiny_gpt2_path, tiny_goldfish_path, tiny_llama_path, tmp_path):
    a, b, base = _piece(tiny_zoo, "step32"), _piece(tiny_zoo, "final"), _piece(tiny_zoo, "step0")
    out = tmp_path / "x"
    cases = [
        (dict(method="ties"), "needs the shared ancestor"),
        (dict(method="linear", base=base), "base-free"),
        (dict(method="slerp"), "needs t"),
        (dict(method="slerp", t=1.5), r"t must be in \[0, 1\]"),
        (dict(method="linear", t=0.5), "t do.* not apply to linear"),
        (dict(method="dare_ties", base=base, density=0.5), "int seed"),
        (dict(method="dare_linear", base=base, seed=1), "needs density"),
        (dict(method="ties", base=base, density=0), r"density must be in \(0, 1\]"),
        (dict(method="linear", weights=[1, -1]), "sum to 0"),
        (dict(method="linear", weights=[1, 2, 3]), "one per model"),
        (dict(method="mean"), "unknown merge method"),
    ]
    for kwargs, message in cases:
        with pytest.raises(WeightsError, match=message):
            build_merge([a, b], out, **kwargs)
    with pytest.raises(WeightsError, match="exactly two"):
        build_merge([a, b, base], out, method="slerp", t=0.5)
    with pytest.raises(WeightsError, match="vocab_rows_differ"):
        build_merge([tiny_gpt2_path, tiny_goldfish_path], out, method="linear")
    with pytest.raises(WeightsError, match="route transport"):
        build_merge([tiny_gpt2_path, tiny_llama_path], out, method="linear")
    with pytest.raises(WeightsError, match="the base"):
        build_merge([tiny_gpt2_path, tiny_gpt2_path], out, method="task_arithmetic", base=tiny_goldfish_path)
    assert not out.exists()


def test_a_failure_on_the_writer_thread_fails_the_build_and_leaves_nothing(tiny_zoo, tmp_path, monkeypatch):
    """Writing and hashing run on a second thread: its error (here a full disk) is the build's, nothing is left."""
    import errno

    from interlingua.mergeability import merge as merge_module

    class FullDisk:
        def __init__(self) -> None:
            self.calls = 0

        def update(self, chunk) -> None:
            self.calls += 1
            if self.calls > 3:  # after the header and a few tensors
                raise OSError(errno.ENOSPC, "No space left on device")

        def hexdigest(self) -> str:
            raise AssertionError("the build went on after the failure")

    class FakeHashlib:
        @staticmethod
        def sha256():
            return FullDisk()

    monkeypatch.setattr(merge_module, "hashlib", FakeHashlib)
    monkeypatch.setattr(merge_module, "_WRITE_CHUNK", 64)  # many chunks, so the merge is ahead of the writer
    with pytest.raises(OSError, match="No space left"):
        build_merge([_piece(tiny_zoo, "step32"), _piece(tiny_zoo, "final")], tmp_path / "m", method="linear")
    assert list(tmp_path.iterdir()) == []
