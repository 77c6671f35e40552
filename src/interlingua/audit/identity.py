"""Identity groups: which specs compute the same function, which share a tokenizer, and the confounds that follow.

Two specs are *bit-identical in effective weights* when their base weight files
hash the same (sha256 of the bytes; a GGUF file's hash; a Hub id at a resolved
commit), they load at the same dtype, and their adapters are the same: an
adapter whose every ``lora_B`` is zero (verdict ``identity`` of
:func:`interlingua.audit.audit_adapter`) counts as *no adapter*, so an identity
adapter groups with its base. Any other adapter is identified by the sha256 of
its files. Hashes are of file bytes: two saves of the same tensors with
different metadata are reported as different (the safe direction).

Tokenizer groups hash the tokenizer files (the GGUF file for a GGUF model).

Confounds: a pair of specs in one weights group and one tokenizer group is the
*same model* (any difference between their results is noise or bookkeeping);
one weights group but different tokenizers *differ only by tokenizer* (a
comparison between them measures the tokenizer, not training).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interlingua.data.models.hashing import (
    ADAPTER_FILES,
    TOKENIZER_FILES,
    file_sha256,
    folder_files_sha256,
    folder_weights_sha256,
    json_sha256,
)
from interlingua.data.models.spec import ModelSpec

__all__ = ["SpecIdentity", "spec_identity", "identity_groups", "NO_OP_ADAPTER"]

NO_OP_ADAPTER = "no-op adapter"


@dataclass
class SpecIdentity:
    label: str
    base_key: str  # sha256 of the base's weights (or Hub id + commit)
    adapter_state: str  # "" (none), NO_OP_ADAPTER, or the adapter files' sha256
    effective_key: str  # base + adapter state + dtype
    tokenizer_key: str
    weights_group: str = ""
    tokenizer_group: str = ""
    confounds: list[str] = field(default_factory=list)


def spec_identity(
    spec: ModelSpec, *, adapter_verdict: str | None = None, cache_dir: str | Path | None = None
) -> SpecIdentity:
    """Keys of ``spec`` from its files (no weights loaded). ``adapter_verdict``: the adapter audit's verdict.

    Raises ``ModelError`` when the model's files cannot be found.
    """
    from interlingua.data.models.source import resolve_hub_revision, resolve_source

    source = resolve_source(spec, cache_dir, assemble=False)
    if source.kind == "hub":
        commit = resolve_hub_revision(source.location, spec.revision)
        base = json_sha256({"hub": source.location, "commit": commit, "gguf_file": source.gguf_file})
        tokenizer = json_sha256({"hub_tokenizer": source.location, "commit": commit})
    elif source.gguf_file is not None:
        path = Path(source.location) / source.gguf_file
        base = tokenizer = file_sha256(path) if path.is_file() else json_sha256({"gguf": str(path)})
    else:
        folder = Path(source.location)
        base = folder_weights_sha256(folder) or json_sha256({"no_weights": str(folder.resolve())})
        tokenizer = folder_files_sha256(folder, TOKENIZER_FILES) or json_sha256({"no_tokenizer": str(folder.resolve())})
    if spec.tokenizer is not None:  # the tokenizer the model is read with, not the one in its folder
        override = Path(spec.tokenizer).expanduser()
        tokenizer = folder_files_sha256(override, TOKENIZER_FILES) or json_sha256({"no_tokenizer": str(override)})
    if spec.adapter is None:
        adapter = ""
    elif adapter_verdict == "identity":
        adapter = NO_OP_ADAPTER
    else:
        folder = Path(spec.adapter).expanduser()
        adapter = (folder_files_sha256(folder, ADAPTER_FILES) if folder.is_dir() else None) or json_sha256(
            {"adapter": spec.adapter, "revision": spec.adapter_revision}
        )
    effective = json_sha256({"base": base, "adapter": "" if adapter == NO_OP_ADAPTER else adapter, "dtype": spec.dtype})
    return SpecIdentity(spec.label, base, adapter, effective, tokenizer)


def _groups(keys: Sequence[str], prefix: str) -> list[str]:
    names: dict[str, str] = {}
    for k in keys:
        names.setdefault(k, f"{prefix}{len(names) + 1}")
    return [names[k] for k in keys]


def identity_groups(identities: Sequence[SpecIdentity]) -> list[SpecIdentity]:
    """Fill ``weights_group`` (W1, W2, ...), ``tokenizer_group`` (T1, ...) and ``confounds`` of each, in order."""
    for ident, w, t in zip(
        identities,
        _groups([i.effective_key for i in identities], "W"),
        _groups([i.tokenizer_key for i in identities], "T"),
    ):
        ident.weights_group, ident.tokenizer_group, ident.confounds = w, t, []
    for a in identities:
        for b in identities:
            if a is b or a.weights_group != b.weights_group:
                continue
            if a.tokenizer_group == b.tokenizer_group:
                a.confounds.append(f"same model as {b.label}")
            else:
                a.confounds.append(f"differs from {b.label} only by tokenizer")
    return list(identities)
