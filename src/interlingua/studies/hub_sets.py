"""Model sets from Hub queries, resolved once and pinned.

A config's ``model_sets:`` entry names an author and a glob on repo names (``author: suchirsalhan``,
``match: "en_*"``). Before the run, :func:`pin_model_sets` resolves each unresolved set: the matching repo
ids, sorted, each with the commit hash the Hub reports now (and, with ``own_tokenizer``, the repo's
tokenizer files downloaded at that commit), written into the set's ``resolved`` list. The spec the run
records in ``run.json`` therefore holds the ids and hashes, and a rerun into the same output folder reads
them from there instead of asking the Hub again, so it measures the same checkpoints even after the author
pushes new commits or repos. A set with ``resolved`` already written in the config is never re-queried.

Without the Hub, resolution fails with a :class:`~interlingua.core.errors.ModelError` that names the repos of
that author in the local Hugging Face cache and their cached commits, which can be pinned by hand.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from interlingua.core.errors import ConfigError, ModelError

__all__ = ["TOKENIZER_PATTERNS", "cached_repos", "pin_model_sets", "resolve_model_set"]

#: The files of a tokenizer fetched for ``own_tokenizer`` (no weights).
TOKENIZER_PATTERNS = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "*.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "added_tokens.json",
]
_QUERY_DEFAULTS: dict[str, Any] = {"author": None, "match": "*", "adapter_over": None, "own_tokenizer": False}


def _matches(repo_id: str, author: str, match: str) -> bool:
    owner, _, name = repo_id.partition("/")
    return owner.lower() == author.lower() and fnmatch.fnmatchcase(name, match)


def cached_repos(author: str, match: str, cache_dir: str | Path | None = None) -> list[tuple[str, list[str]]]:
    """(repo id, cached commit hashes) of the cached Hub models of ``author`` whose names match ``match``."""
    from huggingface_hub import scan_cache_dir

    try:
        info = scan_cache_dir(cache_dir)
    except Exception:  # noqa: BLE001 - no cache folder (CacheNotFound) or an unreadable one: nothing cached
        return []
    out = []
    for repo in info.repos:
        if repo.repo_type == "model" and _matches(repo.repo_id, author, match):
            out.append((repo.repo_id, sorted(r.commit_hash for r in repo.revisions)))
    return sorted(out)


def _unreachable(author: str, match: str, exc: BaseException, cache_dir: str | Path | None) -> ModelError:
    cached = cached_repos(author, match, cache_dir)
    if cached:
        listed = "; ".join(f"{repo} at {', '.join(h[:12] for h in hashes)}" for repo, hashes in cached)
        hint = (
            f"cached here: {listed} ; pin them under the set's `resolved:` (id and the full 40-digit sha "
            "of each) or rerun where the Hub is reachable"
        )
    else:
        hint = (
            "none of them is in the local Hugging Face cache ; run where the Hub is reachable, or list the "
            "repos under `resolved:` (id and sha) by hand"
        )
    text = " ".join(str(exc).split())[:200]
    return ModelError(
        f"model set {author}/{match}: the Hub could not be queried ({type(exc).__name__}: {text}); {hint}"
    )


def resolve_model_set(
    author: str,
    match: str,
    *,
    own_tokenizer: bool = False,
    api: Any = None,
    download: Callable[..., str] | None = None,
    cache_dir: str | Path | None = None,
) -> list[dict[str, Any]]:
    """The repos of ``author`` matching ``match``, sorted by id, each pinned: ``{"id", "sha"[, "tokenizer"]}``.

    ``api``: an ``huggingface_hub.HfApi`` (default a new one); ``download``: ``snapshot_download``-like, used
    for ``own_tokenizer`` (the tokenizer files only, at the pinned commit); ``cache_dir``: the Hub cache
    searched for alternatives when the Hub cannot be reached.
    """
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    try:
        ids = sorted({m.id for m in api.list_models(author=author) if _matches(m.id, author, match)})
        pins = []
        for repo_id in ids:
            sha = api.model_info(repo_id).sha
            if not isinstance(sha, str) or len(sha) != 40:
                raise ModelError(f"model set {author}/{match}: the Hub reports no commit for {repo_id} ; retry later")
            pins.append({"id": repo_id, "sha": sha})
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - offline mode, connection, timeout, HTTP: all mean "not resolvable now"
        raise _unreachable(author, match, exc, cache_dir) from None
    if not pins:
        raise ConfigError(
            f"model set {author}/{match}: no Hub model of {author!r} matches {match!r} ; check the "
            "author and the glob (it matches the repo name after AUTHOR/)"
        )
    if own_tokenizer:
        if download is None:
            from huggingface_hub import snapshot_download

            download = snapshot_download
        for pin in pins:
            try:
                pin["tokenizer"] = str(download(pin["id"], revision=pin["sha"], allow_patterns=TOKENIZER_PATTERNS))
            except Exception as exc:  # noqa: BLE001
                raise _unreachable(author, match, exc, cache_dir) from None
    return pins


def _previous_pins(output: str | Path | None) -> list[dict[str, Any]]:
    """The resolved model sets an earlier run into ``output`` recorded in its run.json."""
    if not output:
        return []
    path = Path(output).expanduser() / "run.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    sets = (info.get("spec") or {}).get("model_sets") if isinstance(info, dict) else None
    return [s for s in sets or [] if isinstance(s, dict) and s.get("resolved")]


def pin_model_sets(
    data: Mapping[str, Any],
    *,
    api: Any = None,
    download: Callable[..., str] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``data`` (a config mapping) with every model set resolved: from the config, else from the run.json of an
    earlier run into the same output folder (same query), else from the Hub (:func:`resolve_model_set`)."""
    sets = list(data.get("model_sets") or [])
    if not sets or all(s.get("resolved") for s in sets):
        return dict(data)
    previous = _previous_pins(data.get("output"))
    out = []
    for s in sets:
        s = dict(s)
        if not s.get("resolved"):
            query = {k: s.get(k, d) for k, d in _QUERY_DEFAULTS.items()}
            earlier = next((p for p in previous if {k: p.get(k, d) for k, d in _QUERY_DEFAULTS.items()} == query), None)
            if earlier is not None:
                s["resolved"] = earlier["resolved"]
                where = "the earlier run's run.json"
            else:
                s["resolved"] = resolve_model_set(
                    str(s["author"]),
                    str(s.get("match", "*")),
                    own_tokenizer=bool(s.get("own_tokenizer")),
                    api=api,
                    download=download,
                )
                where = "the Hub"
            if log:
                log(
                    f"model set {s.get('name')}: {len(s['resolved'])} repos of {s['author']} matching "
                    f"{s.get('match', '*')!r}, pinned from {where}"
                )
        out.append(s)
    return {**data, "model_sets": out}
