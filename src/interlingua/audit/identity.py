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

Faults: a confound is a fault only where it is not what the config asked for.
Each spec carries its *intent*, the weights the config names (base path or
package or zoo piece or Hub id and revision, GGUF file, adapter and its
revision, dtype, merge recipe) and the tokenizer it names (``tokenizer:``).
Two specs that the config names identically are meant to be the same model
(e.g. one checkpoint listed at two sweep points), and two that it names
identically but for ``tokenizer:`` are meant to differ only by tokenizer: those
confounds are listed but are no fault. Otherwise the sameness is unintended
and a fault of each spec that did not get what it asked for: a spec with a
no-op adapter (it asked for a change that is not there) carries it, and the
other spec carries it too unless it is a plain spec that got exactly what it
named (the base an identity adapter collapses onto is honest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interlingua.core.hashing import file_sha256, json_sha256
from interlingua.data.models.hashing import TOKENIZER_FILES, adapter_sha256, folder_files_sha256, folder_weights_sha256
from interlingua.data.models.spec import ModelSpec

__all__ = ["SpecIdentity", "spec_identity", "spec_intent", "identity_groups", "NO_OP_ADAPTER"]

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
    intent: str = ""  # the weights the config names (spec_intent)
    tokenizer_intent: str = ""  # the tokenizer the config names ("" = the model's own)
    faults: list[str] = field(default_factory=list)  # the confounds the config did not ask for
    intended: list[str] = field(default_factory=list)  # the confounds the config asked for

    @property
    def no_op_adapter(self) -> bool:
        return self.adapter_state == NO_OP_ADAPTER


def _where(value: str | None) -> str | None:
    """A local path as an absolute path (two spellings of one folder are one intent); anything else as given."""
    if value is None:
        return None
    p = Path(value).expanduser()
    return str(p.resolve()) if p.exists() else value


def spec_intent(spec: ModelSpec) -> tuple[str, str]:
    """(weights intent, tokenizer intent) of a spec: what the config names, before any file is read."""
    weights = {
        "path": _where(spec.path),
        "package": spec.package,
        "zoo": spec.zoo,
        "revision": spec.revision,
        "gguf_file": spec.gguf_file,
        "adapter": _where(spec.adapter),
        "adapter_revision": spec.adapter_revision,
        "dtype": spec.dtype,
        "tokenwise_merge": spec.tokenwise_merge.model_dump(mode="json") if spec.tokenwise_merge else None,
        "merge": spec.merge.model_dump(mode="json") if spec.merge else None,
    }
    return json_sha256(weights), _where(spec.tokenizer) or ""


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
        adapter = (adapter_sha256(folder) if folder.is_dir() else None) or json_sha256(
            {"adapter": spec.adapter, "revision": spec.adapter_revision}
        )
    effective = json_sha256({"base": base, "adapter": "" if adapter == NO_OP_ADAPTER else adapter, "dtype": spec.dtype})
    intent, tokenizer_intent = spec_intent(spec)
    return SpecIdentity(
        spec.label, base, adapter, effective, tokenizer, intent=intent, tokenizer_intent=tokenizer_intent
    )


def _groups(keys: Sequence[str], prefix: str) -> list[str]:
    names: dict[str, str] = {}
    for k in keys:
        names.setdefault(k, f"{prefix}{len(names) + 1}")
    return [names[k] for k in keys]


def _is_fault(a: SpecIdentity, b: SpecIdentity, same_tokenizer: bool) -> bool:
    """Is ``a``'s confound with ``b`` a fault of ``a`` (module docstring)?"""
    asked_same = a.intent == b.intent and (a.tokenizer_intent == b.tokenizer_intent or not same_tokenizer)
    if asked_same and a.intent:
        return False  # the config names the same weights twice: the sameness is what it asked for
    return a.no_op_adapter or not b.no_op_adapter  # an honest spec is not at fault for another's no-op adapter


def identity_groups(identities: Sequence[SpecIdentity]) -> list[SpecIdentity]:
    """Fill ``weights_group`` (W1, W2, ...), ``tokenizer_group`` (T1, ...), ``confounds`` of each, in order.

    Each confound also goes to ``faults`` or to ``intended`` (module docstring: what the config asked for).
    """
    for ident, w, t in zip(
        identities,
        _groups([i.effective_key for i in identities], "W"),
        _groups([i.tokenizer_key for i in identities], "T"),
    ):
        ident.weights_group, ident.tokenizer_group = w, t
        ident.confounds, ident.faults, ident.intended = [], [], []
    for a in identities:
        for b in identities:
            if a is b or a.weights_group != b.weights_group:
                continue
            same_tokenizer = a.tokenizer_group == b.tokenizer_group
            text = f"same model as {b.label}" if same_tokenizer else f"differs from {b.label} only by tokenizer"
            a.confounds.append(text)
            (a.faults if _is_fault(a, b, same_tokenizer) else a.intended).append(text)
    return list(identities)
