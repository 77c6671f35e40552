"""Tokenizer provenance: which files, how many ids, and whether those ids index the embedding they feed.

An embedding matrix is trained with one tokenizer: row ``i`` is the vector of
that tokenizer's token ``i``. Another tokenizer of the same size loads and runs
without any error, yet its ids pick the rows of unrelated tokens, and the
model is no longer a language model. Nothing at load time notices, so this
audit compares, id by id, the token strings of a tokenizer with those of a
reference (the base model's own tokenizer) and the tokenizer's size with the
embedding's row count (read from the safetensors header: no weights loaded).

Verdicts: ``mismatched tokenizer`` when the tokenizer has more ids than the
embedding has rows, or when fewer than ``min_agreement`` of the ids both
tokenizers have map to the same token string; ``ok`` when every check made
passed; ``unchecked`` when neither an embedding nor a reference was given;
``missing`` when the tokenizer (or the model's weights) cannot be read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlingua.core.safetensors_header import read_safetensors_header
from interlingua.data.models.hashing import TOKENIZER_FILES, folder_files_sha256
from interlingua.data.models.table import ARCHITECTURES

__all__ = [
    "TokenizerAudit",
    "audit_tokenizer",
    "vocab_agreement",
    "embedding_rows",
    "tokenizer_tokens",
    "DEFAULT_MIN_AGREEMENT",
]

DEFAULT_MIN_AGREEMENT = 0.99
_HEADER_LIMIT = 100 * 1024 * 1024


@dataclass
class TokenizerAudit:
    """See the module docstring; ``agree`` counts ids below ``compared`` mapping to the same string."""

    tokenizer: str
    verdict: str  # ok | mismatched tokenizer | unchecked | missing
    reason: str = ""
    tokenizer_sha256: str = ""
    vocab_size: int = -1  # len(tokenizer): base vocabulary plus added tokens
    embedding_rows: int = -1
    special_tokens: dict[str, int] = field(default_factory=dict)
    reference: str = ""
    reference_vocab_size: int = -1
    compared: int = -1  # min(vocab_size, reference_vocab_size)
    agree: int = -1

    @property
    def agree_share(self) -> float:
        return self.agree / self.compared if self.compared > 0 else math.nan


def vocab_agreement(tokens: Sequence[str | None], reference: Sequence[str | None]) -> tuple[int, int]:
    """(ids mapping to the same token string in both, ids compared = min of the two sizes)."""
    n = min(len(tokens), len(reference))
    return sum(1 for i in range(n) if tokens[i] is not None and tokens[i] == reference[i]), n


def tokenizer_tokens(tokenizer: Any) -> list[str | None]:
    """The token string of every id ``0 .. len(tokenizer) - 1`` (added tokens included)."""
    return list(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))


def _safetensors_header(path: Path) -> dict[str, Any]:
    return read_safetensors_header(path, limit=_HEADER_LIMIT)[0]


def embedding_rows(model_dir: str | Path) -> int:
    """Rows of the input embedding of the checkpoint in ``model_dir``, from safetensors headers only.

    The tensor is the one whose name ends in an embedding module of the
    architecture table (``wte``, ``embed_tokens``, ``embed_in``, ...) plus
    ``.weight``. Raises ``ValueError`` when there is no safetensors file or no
    such tensor (a GGUF or ``.bin`` checkpoint: give a safetensors copy).
    """
    folder = Path(model_dir).expanduser()
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        raise ValueError(f"{folder} holds no .safetensors weight files")
    embeddings = {e.embedding.split(".")[-1] for e in ARCHITECTURES.values() if e.embedding is not None}
    suffixes = sorted({f"{name}.weight" for name in embeddings}, key=len, reverse=True)
    found: dict[str, list[int]] = {}
    for path in files:
        for name, info in _safetensors_header(path).items():
            if name != "__metadata__" and isinstance(info, dict) and any(name.endswith(s) for s in suffixes):
                found[name] = list(info.get("shape") or [])
    # the shortest matching name is the token embedding (not a position embedding: wpe is not in the table)
    for name in sorted(found, key=len):
        if len(found[name]) == 2:
            return int(found[name][0])
    raise ValueError(f"no input embedding tensor ({', '.join(suffixes)}) in the safetensors files of {folder}")


def _load(tokenizer: Any) -> tuple[Any, str, str]:
    """(tokenizer object, label, sha256 of its files or "") from a folder path or a tokenizer object."""
    if isinstance(tokenizer, (str, Path)):
        folder = Path(tokenizer).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"the tokenizer folder {folder} does not exist")
        from transformers import AutoTokenizer

        return (
            AutoTokenizer.from_pretrained(str(folder)),
            str(folder),
            folder_files_sha256(folder, TOKENIZER_FILES) or "",
        )
    return tokenizer, getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__, ""


def audit_tokenizer(
    tokenizer: Any,
    *,
    model_dir: str | Path | None = None,
    reference: Any = None,
    min_agreement: float = DEFAULT_MIN_AGREEMENT,
) -> TokenizerAudit:
    """Audit ``tokenizer`` (a folder or a loaded tokenizer) against ``model_dir``'s embedding and ``reference``.

    ``reference``: the tokenizer the embedding was trained with (folder or
    object), usually the base model's own. Never raises for unreadable files:
    the verdict is ``missing`` and ``reason`` says why.
    """
    if not 0.0 <= min_agreement <= 1.0:
        raise ValueError(f"min_agreement must be in [0, 1], got {min_agreement!r}")
    label = str(tokenizer) if isinstance(tokenizer, (str, Path)) else ""
    out = TokenizerAudit(tokenizer=label, verdict="missing")
    try:
        tok, out.tokenizer, out.tokenizer_sha256 = _load(tokenizer)
        tokens = tokenizer_tokens(tok)
    except Exception as exc:  # any unreadable tokenizer is a verdict
        out.reason = f"the tokenizer cannot be loaded ({type(exc).__name__}: {exc})"
        return out
    out.vocab_size = len(tokens)
    out.special_tokens = {
        str(t): int(i) for t, i in sorted(zip(tok.all_special_tokens, tok.all_special_ids), key=lambda x: x[1])
    }
    problems: list[str] = []
    checks: list[str] = []
    if model_dir is not None:
        try:
            out.embedding_rows = embedding_rows(model_dir)
        except (OSError, ValueError) as exc:
            out.reason = f"the embedding of {model_dir} cannot be read ({exc})"
            return out
        checks.append(f"{out.vocab_size} ids vs {out.embedding_rows} embedding rows")
        if out.vocab_size > out.embedding_rows:
            problems.append(
                f"the tokenizer has {out.vocab_size} ids but the embedding only {out.embedding_rows} rows: "
                "ids past the last row index nothing"
            )
    if reference is not None:
        try:
            ref, out.reference, _ = _load(reference)
            ref_tokens = tokenizer_tokens(ref)
        except Exception as exc:
            out.reason = f"the reference tokenizer cannot be loaded ({type(exc).__name__}: {exc})"
            return out
        out.reference_vocab_size = len(ref_tokens)
        out.agree, out.compared = vocab_agreement(tokens, ref_tokens)
        checks.append(f"{out.agree}/{out.compared} ids agree with the reference")
        if out.compared == 0 or out.agree_share < min_agreement:
            problems.append(
                f"only {out.agree} of {out.compared} ids map to the same token as in the reference "
                f"(< {min_agreement:.0%}): its ids do not index the rows the embedding was trained with"
            )
    if problems:
        out.verdict, out.reason = "mismatched tokenizer", "; ".join(problems)
    elif checks:
        out.verdict, out.reason = "ok", "; ".join(checks)
    else:
        out.verdict, out.reason = "unchecked", "neither an embedding nor a reference tokenizer was given"
    return out
