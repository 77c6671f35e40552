"""The rotated twin of a Llama-family model: the same function in a randomly rotated residual basis.

SliceGPT's computational invariance (Ashkboos et al. 2024, "SliceGPT: Compress Large Language Models by
Deleting Rows and Columns", section 3): RMSNorm without its gain commutes with an orthogonal map,
``x Q / rms(x Q) = (x / rms(x)) Q`` (``||x Q|| = ||x||``). So, for a random orthogonal ``Q`` (``d x d``):

1. fold each RMSNorm gain ``g`` into the linear layers that read its output (``W <- W diag(g)``: the
   input norm into q/k/v_proj, the post-attention norm into gate/up_proj, the final norm into the LM
   head) and set the gain to 1;
2. untie the input embedding and the LM head (they get different rotations);
3. multiply every matrix that WRITES the residual stream by ``Q`` (the embedding ``E <- E Q``; o_proj
   and down_proj, ``W <- Q^T W`` in torch's ``(out, in)`` layout, and their biases ``b <- b Q``) and
   every matrix that READS it by ``Q^T`` (q/k/v_proj, gate/up_proj, the LM head: ``W <- W Q``).

The twin computes the same function: its logits equal the original's up to float rounding, and its
residual stream is the original's times ``Q``. In Hugging Face's ``output_hidden_states`` (index 0 =
embedding output, ``k`` = output of block ``k``) that holds for every index ``0..L-1`` and for the
patching sites ``0..L`` (:mod:`interlingua.patching.hooks` reads the last block's output BEFORE the
final norm); the last entry Hugging Face returns is AFTER the final norm, and there the twin (gain
folded away) gives ``(h_L / g) Q``, not ``h_L Q``.

So a map fitted from a model's states to its twin's has a known answer that is not the identity:
``Q``. A Procrustes fit recovers it to rounding when the rows span the width; a map applied
transposed gives ``Q^T``, a map fitted in the wrong direction ``Q^T`` as well; a width or basis
mix-up gives something else. :func:`make_twin` builds the twin in memory, :func:`build_twin` stores
it (``twin.json``: seed, ``Q``'s sha256, the source model, the measured max logit and state
differences on check sentences, every file's sha256) like the project's other builds
(:mod:`interlingua.core.builds`).

Llama-family here: ``model_type`` llama, mistral or qwen2 (pre-norm blocks, RMSNorm ``x * g``, no
post-norms, no embedding scaling). Gemma's norms (``x * (1 + g)``, sandwich norms around each
sub-layer, a scaled embedding) need more than this and are refused.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from interlingua.analysis.rotation import TWIN_FAMILIES, random_orthogonal
from interlingua.patching.errors import InterventionError

__all__ = [
    "TWIN_FILE",
    "TWIN_Q_FILE",
    "CHECK_SENTENCES",
    "is_twinnable",
    "make_twin",
    "twin_check",
    "build_twin",
    "load_twin_q",
    "twin_last_state",
    "twin_rows",
    "final_gain",
]

TWIN_FILE = "twin.json"
TWIN_Q_FILE = "twin_q.npy"
TWIN_FORMAT = 1
#: the sentences a build checks the twin on (its logits and states against the original's)
CHECK_SENTENCES = (
    "The capital of France is Paris.",
    "Die Hauptstadt von Deutschland ist Berlin.",
    "In the beginning was the Word, and the Word was with God.",
    "La capital de España es Madrid.",
)
_READERS_ATTN = ("q_proj", "k_proj", "v_proj")
_READERS_MLP = ("gate_proj", "up_proj")


def _hf(lm: Any) -> Any:
    base_of = getattr(lm, "get_base_model", None)
    return base_of() if callable(base_of) else lm


def _parts(lm: Any) -> tuple[Any, nn.Embedding, list[Any], Any, nn.Linear]:
    """(decoder, embedding, blocks, final norm, LM head) of a Llama-family causal LM."""
    hf = _hf(lm)
    inner = getattr(hf, "model", None)
    head = getattr(hf, "lm_head", None)
    ok = (
        inner is not None
        and isinstance(getattr(inner, "embed_tokens", None), nn.Embedding)
        and isinstance(getattr(inner, "layers", None), nn.ModuleList)
        and getattr(inner, "norm", None) is not None
        and isinstance(head, nn.Linear)
    )
    if not ok:
        raise InterventionError(
            f"{type(hf).__name__} is not laid out as a Llama-family causal LM (model.embed_tokens, model.layers, "
            "model.norm, lm_head); the rotated twin is built for llama, mistral and qwen2 models"
        )
    assert inner is not None and isinstance(head, nn.Linear)
    return inner, inner.embed_tokens, list(inner.layers), inner.norm, head


def is_twinnable(lm: nn.Module) -> bool:
    """Whether :func:`make_twin` can rotate ``lm``: a Llama-family ``model_type`` laid out as it expects."""
    mt = str(getattr(getattr(_hf(lm), "config", None), "model_type", ""))
    if mt not in TWIN_FAMILIES:
        return False
    try:
        _parts(lm)
    except InterventionError:
        return False
    return True


def _gain(norm: Any) -> torch.Tensor:
    w = getattr(norm, "weight", None)
    if not isinstance(w, torch.Tensor) or w.ndim != 1:
        raise InterventionError(f"{type(norm).__name__} has no per-dimension gain to fold")
    return w.detach().double()


def make_twin(lm: nn.Module, seed: int = 0, q: np.ndarray | None = None) -> tuple[Any, np.ndarray]:
    """``(twin, Q)``: a rotated copy of the Llama-family causal LM ``lm`` (left unchanged) and its rotation.

    ``Q``: :func:`random_orthogonal` of the width from ``seed``, or the given orthogonal ``q``. The arithmetic is
    done in float64 and each weight is cast back to its own dtype once (so a float32 model's twin differs from the
    exact rotation by one float32 rounding per weight). Raises :class:`InterventionError` for another architecture.
    """
    hf = _hf(lm)
    mt = str(getattr(getattr(hf, "config", None), "model_type", ""))
    if mt not in TWIN_FAMILIES:
        raise InterventionError(
            f"the rotated twin needs a Llama-family model ({', '.join(TWIN_FAMILIES)}); got model_type {mt!r} "
            "(Gemma's (1 + g) and sandwich norms and scaled embedding are not handled); use the control on a "
            "Llama-family donor or target"
        )
    twin: Any = copy.deepcopy(hf)
    _, emb, blocks, norm, head = _parts(twin)
    d = int(emb.weight.shape[1])
    if q is None:
        q = random_orthogonal(d, seed)
    q = np.asarray(q, dtype=np.float64)
    if q.shape != (d, d) or not np.allclose(q.T @ q, np.eye(d), atol=1e-10):
        raise InterventionError(f"q must be an orthogonal {d} x {d} matrix; got shape {q.shape}")
    Q = torch.as_tensor(q, dtype=torch.float64)

    def put(param: Any, value: torch.Tensor) -> None:
        with torch.no_grad():
            param.copy_(value.to(param.dtype))

    def read(linear: nn.Linear, gain: torch.Tensor | None) -> None:
        w = linear.weight.detach().double()
        if gain is not None:
            w = w * gain[None, :]
        put(linear.weight, w @ Q)

    def write(linear: nn.Linear) -> None:
        put(linear.weight, Q.T @ linear.weight.detach().double())
        if linear.bias is not None:
            put(linear.bias, linear.bias.detach().double() @ Q)

    with torch.no_grad():
        # untie first: the head gets W diag(g_final) Q, the embedding E Q
        head.weight = nn.Parameter(head.weight.detach().clone())
        twin.config.tie_word_embeddings = False
        for block in blocks:
            attn, mlp = getattr(block, "self_attn", None), getattr(block, "mlp", None)
            if attn is None or mlp is None:
                raise InterventionError(f"{type(block).__name__} has no self_attn / mlp; not a Llama-family block")
            g_in, g_post = _gain(block.input_layernorm), _gain(block.post_attention_layernorm)
            for name in _READERS_ATTN:
                read(getattr(attn, name), g_in)
            for name in _READERS_MLP:
                read(getattr(mlp, name), g_post)
            write(attn.o_proj)
            write(mlp.down_proj)
            put(block.input_layernorm.weight, torch.ones_like(g_in))
            put(block.post_attention_layernorm.weight, torch.ones_like(g_post))
        g_final = _gain(norm)
        read(head, g_final)
        put(norm.weight, torch.ones_like(g_final))
        put(emb.weight, emb.weight.detach().double() @ Q)
    twin.eval()
    return twin, q


def twin_last_state(last: np.ndarray, final_gain: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The twin's state after the final norm from the original's: ``(h_L / g) Q`` (its gain is folded away)."""
    return (np.asarray(last, dtype=np.float64) / np.asarray(final_gain, dtype=np.float64)) @ q


def final_gain(lm: Any) -> np.ndarray:
    """The final RMSNorm's gain ``g`` of a Llama-family model (float64): the twin's last stored state is ``/ g``."""
    return _gain(_parts(lm)[3]).numpy()


def twin_rows(reps: Any, q: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """A twin's stored representations from its original's, ``(n_states, n, d)``: ``reps[k] @ Q`` for ``k < L``
    and ``(reps[L] / g) @ Q`` for the last one (stored after the final norm, whose gain the twin folded away).

    Exact for any representation linear in the hidden states (mean pooling, a word's mean over its sub-words,
    one token's state), which is what the patching maps are fitted on; :func:`twin_check` measures that the twin
    model's own states are these on real sentences.
    """
    r = np.asarray(reps, dtype=np.float64)
    out = r @ q
    out[-1] = twin_last_state(r[-1], gain, q)
    return out


def twin_check(
    original: nn.Module, twin: nn.Module, tokenizer: Any, q: np.ndarray, sentences: Sequence[str] = CHECK_SENTENCES
) -> dict[str, Any]:
    """The twin against the original on ``sentences``: max |logit difference| and max |twin state - state Q|.

    States: every hidden-state index ``0..L-1`` of ``output_hidden_states`` (compared with ``h Q``) and the last
    one, after the final norm (compared with ``(h_L / g) Q``, :func:`twin_last_state`). Also relative to the
    largest |logit| / |state|, so a float32 model's rounding reads as such.
    """
    q_t = torch.as_tensor(q, dtype=torch.float64)
    g = _gain(_parts(original)[3])
    logit_diff = state_diff = logit_max = state_max = 0.0
    agree = True
    with torch.no_grad():
        for s in sentences:
            ids = tokenizer(s, return_tensors="pt")["input_ids"]
            a = _hf(original)(input_ids=ids, output_hidden_states=True)
            b = _hf(twin)(input_ids=ids, output_hidden_states=True)
            la, lb = a.logits.double(), b.logits.double()
            logit_diff = max(logit_diff, float((la - lb).abs().max()))
            logit_max = max(logit_max, float(la.abs().max()))
            agree = agree and bool(torch.equal(la.argmax(-1), lb.argmax(-1)))
            hs_a, hs_b = a.hidden_states, b.hidden_states
            for k in range(len(hs_a)):
                ha = hs_a[k][0].double()
                want = (ha / g) @ q_t if k == len(hs_a) - 1 else ha @ q_t
                state_diff = max(state_diff, float((hs_b[k][0].double() - want).abs().max()))
                state_max = max(state_max, float(ha.abs().max()))
    return {
        "sentences": len(sentences),
        "max_logit_diff": logit_diff,
        "max_abs_logit": logit_max,
        "max_state_diff": state_diff,
        "max_abs_state": state_max,
        "top1_agree": agree,
    }


def _q_sha(q: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(q, dtype="<f8").tobytes()).hexdigest()


def _refuse(out: Path) -> InterventionError:
    return InterventionError(
        f"{out} exists and holds something other than an identical twin build (another model or seed, or a damaged "
        "build); choose another output folder or delete it"
    )


def _unwritable(parent: Path, exc: OSError) -> InterventionError:
    return InterventionError(f"cannot create a twin build folder in {parent} ({exc}); choose a writable folder")


def build_twin(
    lm: nn.Module,
    tokenizer: Any,
    out: str | Path,
    *,
    seed: int = 0,
    source: str = "",
    source_key: str = "",
    sentences: Sequence[str] = CHECK_SENTENCES,
    max_rel_logit_diff: float = 1e-3,
) -> dict[str, Any]:
    """Build, check and store the rotated twin of ``lm`` in the folder ``out``; return its ``twin.json`` record.

    The folder holds the twin (``save_pretrained``, untied), the tokenizer, ``Q`` (``twin_q.npy``, float64) and
    ``twin.json``: the seed, ``Q``'s sha256, ``source`` (a label) and ``source_key`` (what identifies the
    original, e.g. its fingerprint; part of the build's key), the check of :func:`twin_check` and every file's
    sha256, written last. A folder already holding an intact build of the same key is returned as it is. Raises
    :class:`InterventionError` when the twin's logits differ from the original's by more than
    ``max_rel_logit_diff`` of the largest |logit| (the invariance did not hold: a wrong architecture).
    """
    from interlingua.core.builds import build_folder, files_record, install_build, library_versions, previous_build
    from interlingua.core.store import content_key

    out = Path(out).expanduser()
    hf = _hf(lm)
    d = int(_parts(hf)[1].weight.shape[1])
    q = random_orthogonal(d, seed)
    key = content_key(
        {"format": TWIN_FORMAT, "seed": int(seed), "q_sha256": _q_sha(q), "source": source, "source_key": source_key}
    )
    if out.exists():
        if not out.is_dir():
            raise InterventionError(f"the output {out} exists and is a file; give a folder path")
        if any(out.iterdir()):
            previous = previous_build(out, TWIN_FILE, key)
            if previous is None:
                raise _refuse(out)
            return previous
    twin: Any
    twin, q = make_twin(hf, seed, q)
    check = twin_check(hf, twin, tokenizer, q, sentences)
    rel = check["max_logit_diff"] / max(check["max_abs_logit"], 1e-30)
    if not rel <= max_rel_logit_diff:
        raise InterventionError(
            f"the twin of {source or type(hf).__name__} does not compute the same function: max logit difference "
            f"{check['max_logit_diff']:.3g} ({rel:.3g} of the largest logit) > {max_rel_logit_diff}"
        )
    with build_folder(out, _unwritable) as tmp:
        twin.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        np.save(tmp / TWIN_Q_FILE, q)
        record: dict[str, Any] = {
            "format": TWIN_FORMAT,
            "key": key,
            "seed": int(seed),
            "width": d,
            "q_sha256": _q_sha(q),
            "source": source,
            "source_key": source_key,
            "check": check,
            "libraries": library_versions(("interlingua", "torch", "transformers", "numpy")),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        record["files"] = files_record(tmp)
        (tmp / TWIN_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        existing = install_build(tmp, out, TWIN_FILE, key, _refuse)
        if existing is not None:
            return existing
    return record


def load_twin_q(folder: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """``(Q, record)`` of a stored twin, after checking every file against its record (a damaged build raises)."""
    from interlingua.core.builds import build_problem

    record, problem = build_problem(Path(folder), TWIN_FILE)
    if record is None:
        raise InterventionError(f"{folder} is not an intact twin build: {problem}; rebuild it with build_twin")
    q = np.load(Path(folder) / TWIN_Q_FILE)
    if _q_sha(q) != record.get("q_sha256"):
        raise InterventionError(f"{folder}: {TWIN_Q_FILE} does not match the record's sha256; rebuild the twin")
    return q, record
