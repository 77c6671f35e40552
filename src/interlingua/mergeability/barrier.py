"""Loss barriers: linear mode connectivity of two native-route checkpoints.

For ``t`` on a grid in [0, 1] the interpolated model has every tensor
``(1 - t) * a + t * b`` (float64, cast to A's dtype: ``t = 0`` gives A's tensors
exactly, ``t = 1`` B's). Its mean per-token NLL on a set of sentences is
:func:`interlingua.data.causal_lm.mean_nll` (teacher forced, nats per scored
token, special-token targets excluded by default; options pass through).
With ``L(t)`` that NLL on the grid:

* the endpoint line ``(1 - t) L(0) + t L(1)``; ``excess(t) = L(t) - line(t)``;
* ``barrier = max_t excess(t)``; the grid always holds 0 and 1, where the excess
  is 0 exactly, so ``barrier >= 0``; ``t_barrier``: the first ``t`` reaching it;
* the best merge: ``best_t`` the first ``t`` of least ``L``, and
  ``best_gain = min(L(0), L(1)) - L(best_t) >= 0``: how much the best
  interpolation beats the better endpoint (0 when an endpoint is best).

Tokenizers: each text set is scored with ONE tokenizer, the same for every
``t`` (A's by default). Two models with different vocabularies (e.g. an
English and a German model, same architecture and vocabulary size, trained
independently) interpolate row by row of their embedding tables whatever the
tokens mean: score A's language with A's tokenizer and B's with B's
(``texts={"eng": (english, "a"), "deu": (german, "b")}``); each set has its own
curve and barrier, and its endpoint NLLs are each model's NLL under that
tokenizer.

Streaming: model A is loaded once (``AutoModelForCausalLM``, stored dtype);
for each ``t`` every parameter is overwritten in place, tensor by tensor, from
A's and B's safetensors files (LoRA adapters merged on the fly). At most one
model, plus one tensor of each checkpoint, is in memory. Both checkpoints must
be native with every tensor shared, and their configs equal except for names,
versions, dtypes and special-token ids (which do not change the forward pass).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interlingua.core.schema import Column, result_table
from interlingua.mergeability.comparability import (
    Checkpoint,
    CheckpointRef,
    Comparability,
    comparability,
    read_checkpoint,
)
from interlingua.mergeability.diagnostics import TensorReader
from interlingua.mergeability.errors import WeightsError

__all__ = ["CURVE_COLUMNS", "DEFAULT_GRID", "SUMMARY_COLUMNS", "BarrierResult", "loss_barrier"]

DEFAULT_GRID = tuple(i / 10 for i in range(11))

CURVE_COLUMNS: tuple[Column, ...] = (
    Column("text", "str", "name of the text set"),
    Column("t", "float", "interpolation weight of B (0 = A, 1 = B)"),
    Column("nll", "float", "mean NLL per scored token (nats) of the interpolated model"),
    Column("n_tokens", "int", "scored tokens"),
    Column("line", "float", "(1 - t) NLL(0) + t NLL(1)"),
    Column("excess", "float", "nll - line"),
)
SUMMARY_COLUMNS: tuple[Column, ...] = (
    Column("text", "str", "name of the text set"),
    Column("tokenizer", "str", "the tokenizer's folder (a: A's, b: B's, or a path)"),
    Column("n_sentences", "int", "sentences scored"),
    Column("n_tokens", "int", "scored tokens (the same at every t)"),
    Column("nll_a", "float", "NLL at t = 0 (A)"),
    Column("nll_b", "float", "NLL at t = 1 (B)"),
    Column("barrier", "float", "max over the grid of nll - line (>= 0)"),
    Column("t_barrier", "float", "first t reaching the barrier"),
    Column("best_t", "float", "first t of least NLL"),
    Column("best_nll", "float", "least NLL over the grid"),
    Column("best_gain", "float", "min(nll_a, nll_b) - best_nll (>= 0)"),
    Column("points", "int", "grid points"),
)
#: Config fields that do not change the forward pass (ignored when the two configs are compared).
_CONFIG_IGNORED = {
    "_name_or_path",
    "name_or_path",
    "transformers_version",
    "architectures",
    "dtype",
    "torch_dtype",
    "_commit_hash",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "cls_token_id",
    "decoder_start_token_id",
    "tokenizer_class",
    "use_cache",
    "task_specific_params",
}


@dataclass(frozen=True)
class BarrierResult:
    """``curve`` (:data:`CURVE_COLUMNS`), ``summary`` (:data:`SUMMARY_COLUMNS`), the A-B ``coverage`` and the grid."""

    curve: Any
    summary: Any
    coverage: Comparability
    grid: tuple[float, ...]


def _grid(ts: Sequence[float] | None) -> tuple[float, ...]:
    values = DEFAULT_GRID if ts is None else ts
    out: set[float] = set()
    for t in values:
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(float(t)) or not 0 <= t <= 1:
            raise WeightsError(f"grid values must be numbers in [0, 1], got {t!r}")
        out.add(float(t))
    return tuple(sorted(out | {0.0, 1.0}))


def _configs_differ(a: Checkpoint, b: Checkpoint) -> list[str]:
    def flat(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out = {}
        for k, v in cfg.items():
            if k in _CONFIG_IGNORED:
                continue
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    fa, fb = flat(a.config), flat(b.config)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))


def _texts(texts: Any, tokenizer: Any) -> dict[str, tuple[list[str], Any]]:
    if isinstance(texts, Mapping):
        out = {}
        for name, value in texts.items():
            if isinstance(value, tuple) and len(value) == 2 and not isinstance(value[0], str):
                sentences, tok = value
            else:
                sentences, tok = value, tokenizer
            out[str(name)] = (_sentences(sentences, str(name)), tok)
        if not out:
            raise WeightsError("texts is empty: give at least one set of sentences")
        return out
    return {"text": (_sentences(texts, "texts"), tokenizer)}


def _sentences(value: Any, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise WeightsError(f"{what} must be a non-empty list of sentences")
    if not all(isinstance(s, str) for s in value):
        raise WeightsError(f"{what} must hold strings only")
    return list(value)


def _load_tokenizer(which: Any, ca: Checkpoint, cb: Checkpoint) -> tuple[Any, str]:
    from transformers import AutoTokenizer

    from interlingua.mergeability.merge import _tokenizer_folder

    if which is None or which == "a":
        folder = _tokenizer_folder(ca)
    elif which == "b":
        folder = _tokenizer_folder(cb)
    elif isinstance(which, (str, bytes)) or hasattr(which, "__fspath__"):
        folder = which
    else:
        return which, type(which).__name__  # a tokenizer object
    try:
        return AutoTokenizer.from_pretrained(str(folder)), str(folder)
    except Exception as exc:  # tokenizers' parse errors are plain Exceptions
        raise WeightsError(
            f"the tokenizer at {folder} cannot be loaded "
            f"({str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__})"
        ) from exc


def _load_model(ckpt: Checkpoint) -> Any:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        lm = AutoModelForCausalLM.from_pretrained(str(ckpt.folder), dtype="auto", trust_remote_code=False)
    except Exception as exc:
        raise WeightsError(f"{ckpt.folder} cannot be loaded as a causal LM ({exc})") from exc
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
    return lm.eval()


def _targets(lm: Any, ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """Checkpoint tensor name -> the model's parameter / buffer it fills; every parameter must be covered."""
    named = dict(lm.named_parameters(remove_duplicate=False))
    named.update(dict(lm.named_buffers(remove_duplicate=False)))
    out = {}
    for name in ckpt.tensors:
        target = named.get(name)
        if target is None:
            raise WeightsError(
                f"the checkpoint tensor {name!r} is not a parameter of the loaded {type(lm).__name__} "
                "(renamed by this transformers version?); the interpolation cannot place it"
            )
        out[name] = target
    covered = {t.data_ptr() for t in out.values()}
    missing = [n for n, p in lm.named_parameters() if p.data_ptr() not in covered]
    if missing:
        raise WeightsError(
            f"the model's parameters {missing[:3]} are not in the checkpoint; they would stay A's at every t"
        )
    return out


def loss_barrier(
    a: CheckpointRef,
    b: CheckpointRef,
    texts: Sequence[str] | Mapping[str, Any],
    *,
    ts: Sequence[float] | None = None,
    tokenizer: Any = None,
    **nll_options: Any,
) -> BarrierResult:
    """The loss barrier between ``a`` and ``b`` on ``texts`` (see the module docstring).

    ``texts``: a list of sentences (scored with ``tokenizer``: ``"a"``
    (default), ``"b"``, a folder or a tokenizer object), or ``{name: sentences}``
    / ``{name: (sentences, tokenizer)}`` for several sets. ``ts``: grid in [0, 1]
    (default 0, 0.1, ..., 1; 0 and 1 always added). ``nll_options`` go to
    :func:`interlingua.data.causal_lm.mean_nll` (``max_length``, ``batch_size``,
    ``special_tokens``, ...). Raises :class:`WeightsError` when the two are not
    native with every tensor shared, or their configs differ in the forward pass.
    """
    from interlingua.data.causal_lm import mean_nll
    from interlingua.mergeability.merge import _aligned_names

    grid = _grid(ts)
    ca, cb = read_checkpoint(a), read_checkpoint(b)
    sets = _texts(texts, tokenizer)
    aligned = dict(_aligned_names([ca, cb], None))  # raises unless native with every tensor shared
    differ = _configs_differ(ca, cb)
    if differ:
        raise WeightsError(
            f"the configs of A ({ca.folder}) and B ({cb.folder}) differ in {', '.join(differ[:5])}: the "
            "interpolated weights would run under A's config, so the endpoint t = 1 would not be B"
        )
    coverage = comparability(ca, cb)
    toks = {name: _load_tokenizer(tok, ca, cb) for name, (_, tok) in sets.items()}
    lm = _load_model(ca)
    targets = _targets(lm, ca)
    curve: dict[str, list[tuple[float, float, int]]] = {name: [] for name in sets}
    with TensorReader(ca) as ra, TensorReader(cb) as rb, torch.no_grad():
        for t in grid:
            for name, target in targets.items():
                other, transposed = aligned[name][0]
                xa = ra.get(name, float64=True)
                xb = rb.get(other, float64=True)
                if transposed:
                    xb = xb.T
                mixed = xa.mul_(1.0 - t).add_(xb, alpha=t)
                target.copy_(mixed.to(target.dtype))
                del xa, xb, mixed
            for set_name, (sentences, _) in sets.items():
                nll, count, _vocab, _trunc = mean_nll(lm, toks[set_name][0], sentences, **nll_options)
                if count == 0:
                    raise WeightsError(
                        f"no token of the text set {set_name!r} was scored (every sentence is one token)"
                    )
                curve[set_name].append((t, nll, count))
    del lm
    curve_rows, summary_rows = [], []
    for set_name, points in curve.items():
        nll_a, nll_b = points[0][1], points[-1][1]
        excess = []
        for t, nll, count in points:
            line = (1.0 - t) * nll_a + t * nll_b
            excess.append(nll - line)
            curve_rows.append(
                {"text": set_name, "t": t, "nll": nll, "n_tokens": count, "line": line, "excess": nll - line}
            )
        i_bar = max(range(len(points)), key=lambda i: (excess[i], -i))
        i_best = min(range(len(points)), key=lambda i: (points[i][1], i))
        summary_rows.append(
            {
                "text": set_name,
                "tokenizer": toks[set_name][1],
                "n_sentences": len(sets[set_name][0]),
                "n_tokens": points[0][2],
                "nll_a": nll_a,
                "nll_b": nll_b,
                "barrier": excess[i_bar],
                "t_barrier": points[i_bar][0],
                "best_t": points[i_best][0],
                "best_nll": points[i_best][1],
                "best_gain": min(nll_a, nll_b) - points[i_best][1],
                "points": len(points),
            }
        )
    return BarrierResult(
        result_table(curve_rows, CURVE_COLUMNS), result_table(summary_rows, SUMMARY_COLUMNS), coverage, grid
    )
