"""OPUS-100, Tatoeba and BouQUET through the ``datasets`` library.

All three come from the Hugging Face Hub and end in a :class:`ParallelCorpus`
keyed by canonical FLORES+ language codes (``deu_Latn``), so they sample
(``ParallelCorpus.sample(n, seed)``) and fingerprint exactly like FLORES+.

Pair-wise corpora (OPUS-100, Tatoeba)
-------------------------------------
Both are published one language pair per Hub config and are English-centric.

* OPUS-100, ``Helsinki-NLP/opus-100``: configs ``<a>-<b>`` with the two
  ISO 639-1 codes in alphabetical order (``de-en``, ``en-ru``), splits
  ``train``/``validation``/``test`` (test: up to 2000 pairs), rows
  ``{"translation": {"de": ..., "en": ...}}``.
* Tatoeba, ``Helsinki-NLP/tatoeba_mt`` (the Tatoeba Translation Challenge
  test sets): configs ``<a>-<b>`` with ISO 639-3 codes in alphabetical order
  (``deu-eng``, ``eng-rus``), splits ``test``/``validation``, columns
  ``sourceLang``, ``targetlang``, ``sourceString`` (the first language of the
  config) and ``targetString``. The challenge uses macrolanguage codes
  (``zho``, ``ara``, ``fas``, ``msa``); FLORES+ codes are mapped to them and,
  when that config is missing, the plain ISO 639-3 code is tried.
  A ``translation`` dict column (the ``Helsinki-NLP/tatoeba`` layout) is read
  too.

The layouts above were written from the dataset cards and the Tatoeba
Challenge release, not checked against the Hub from here; ``dataset=`` points
the loaders at a mirror or another dataset with the same layout, and
``codes={"deu_Latn": "de"}`` overrides the language-code mapping.

Building the corpus (the paper's recipe):

1. every pair row keeps only if *both* sides have at least ``min_chars``
   characters (after stripping; default 50);
2. within a pair, identical English sentences are deduplicated (the first
   row wins);
3. for more than two languages, the pairs ``eng-X`` are joined on the
   English sentence: a row survives only if its English text is in every
   pair (English itself is part of the corpus only if it was requested);
   for exactly two languages the pair is used as is (a non-English pair is
   read directly, keyed on the language whose dataset code sorts first, and
   joined through English when the dataset has no such pair);
4. the id of a row is ``sha256(key sentence, UTF-8)`` in hex, first 16
   characters, where the key sentence is the English one (or the key side of a
   direct pair). Ids therefore do not depend on the row order, the split's
   revision layout or which other languages were requested, and the rows are
   ordered by id, so ``sample(n, seed)`` draws the same sentences whatever
   order the Hub serves them in.

BouQUET
-------
``facebook/bouquet`` is gated: accept its terms on the dataset page, then
``huggingface-cli login`` (or ``hf auth login``), set ``HF_TOKEN`` or pass ``token=``. Assumed
layout (**unverified**, the dataset could not be read from here): a "long"
table, one row per (sentence, language), with a shared sentence id column
(``uniq_id``/``id``/``sentence_id``), a language-code column
(``lang``/``language``/``lang_code``, FLORES-style codes such as
``eng_Latn``) and a text column (``text``/``sentence``); a pair layout
(``src_lang``/``src_text``/``tgt_lang``/``tgt_text`` with a shared id) is read
too. The column names are options (``id_column``, ``language_column``,
``text_column``) and ``config`` selects a Hub config. Ids are the dataset's
own, sentences are aligned on them (ids present in every requested language)
and sorted by id (numerically when they are numbers).

Errors: no ``datasets``, no network or no cached copy -> :class:`CorpusError`
naming the offline sources; a gated dataset without access -> a
:class:`CorpusError` naming the gate and how to pass it; a language or pair
the dataset lacks -> :class:`LanguageError` listing what it has.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.core.languages import normalize_language
from interlingua.data.corpora.corpus import ParallelCorpus
from interlingua.data.corpora.flores import _describe, _is_gated, offline_alternatives

__all__ = [
    "BOUQUET_DATASET",
    "OPUS100_DATASET",
    "OPUS100_LANGUAGES",
    "PIVOT",
    "TATOEBA_DATASET",
    "load_bouquet",
    "load_opus100",
    "load_tatoeba",
    "sentence_id",
]

OPUS100_DATASET = "Helsinki-NLP/opus-100"
TATOEBA_DATASET = "Helsinki-NLP/tatoeba_mt"
BOUQUET_DATASET = "facebook/bouquet"
#: The pivot of the English-centric pair-wise corpora.
PIVOT = "eng_Latn"
_ID_LENGTH = 16

#: ISO 639-3 part of a FLORES+ code (macrolanguage and individual codes) -> ISO 639-1.
_ISO1: dict[str, str] = {
    "afr": "af", "amh": "am", "arg": "an", "arb": "ar", "ara": "ar", "asm": "as",
    "azj": "az", "aze": "az", "bel": "be", "bul": "bg", "ben": "bn", "bre": "br",
    "bos": "bs", "cat": "ca", "ces": "cs", "cym": "cy", "dan": "da", "deu": "de",
    "dzo": "dz", "ell": "el", "eng": "en", "epo": "eo", "spa": "es", "est": "et",
    "ekk": "et", "eus": "eu", "pes": "fa", "fas": "fa", "fin": "fi", "fra": "fr",
    "fry": "fy", "gle": "ga", "gla": "gd", "glg": "gl", "guj": "gu", "hau": "ha",
    "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "hye": "hy", "ind": "id",
    "ibo": "ig", "isl": "is", "ita": "it", "jpn": "ja", "kat": "ka", "kaz": "kk",
    "khm": "km", "kan": "kn", "kor": "ko", "kmr": "ku", "kur": "ku", "kir": "ky",
    "lim": "li", "lit": "lt", "lvs": "lv", "lav": "lv", "plt": "mg", "mlg": "mg",
    "mkd": "mk", "mal": "ml", "khk": "mn", "mon": "mn", "mar": "mr", "zsm": "ms",
    "msa": "ms", "mlt": "mt", "mya": "my", "nob": "nb", "npi": "ne", "nep": "ne",
    "nld": "nl", "nno": "nn", "nor": "no", "oci": "oc", "ory": "or", "ori": "or",
    "pan": "pa", "pol": "pl", "pbt": "ps", "pus": "ps", "por": "pt", "ron": "ro",
    "rus": "ru", "kin": "rw", "sme": "se", "hbs": "sh", "sin": "si", "slk": "sk",
    "slv": "sl", "als": "sq", "sqi": "sq", "srp": "sr", "swe": "sv", "tam": "ta",
    "tel": "te", "tgk": "tg", "tha": "th", "tuk": "tk", "tur": "tr", "tat": "tt",
    "uig": "ug", "ukr": "uk", "urd": "ur", "uzn": "uz", "uzb": "uz", "vie": "vi",
    "wln": "wa", "xho": "xh", "ydd": "yi", "yid": "yi", "yor": "yo", "cmn": "zh",
    "zho": "zh", "zul": "zu", "swh": "sw", "swa": "sw",
}  # fmt: skip

#: The 100 languages of OPUS-100 (ISO 639-1), each paired with English.
OPUS100_LANGUAGES: tuple[str, ...] = tuple(
    [
        "af",
        "am",
        "an",
        "ar",
        "as",
        "az",
        "be",
        "bg",
        "bn",
        "br",
        "bs",
        "ca",
        "cs",
        "cy",
        "da",
        "de",
        "dz",
        "el",
        "en",
        "eo",
        "es",
        "et",
        "eu",
        "fa",
        "fi",
        "fr",
        "fy",
        "ga",
        "gd",
        "gl",
        "gu",
        "ha",
        "he",
        "hi",
        "hr",
        "hu",
        "hy",
        "id",
        "ig",
        "is",
        "it",
        "ja",
        "ka",
        "kk",
        "km",
        "kn",
        "ko",
        "ku",
        "ky",
        "li",
        "lt",
        "lv",
        "mg",
        "mk",
        "ml",
        "mn",
        "mr",
        "ms",
        "mt",
        "my",
        "nb",
        "ne",
        "nl",
        "nn",
        "no",
        "oc",
        "or",
        "pa",
        "pl",
        "ps",
        "pt",
        "ro",
        "ru",
        "rw",
        "se",
        "sh",
        "si",
        "sk",
        "sl",
        "sq",
        "sr",
        "sv",
        "ta",
        "te",
        "tg",
        "th",
        "tk",
        "tr",
        "tt",
        "ug",
        "uk",
        "ur",
        "uz",
        "vi",
        "wa",
        "xh",
        "yi",
        "yo",
        "zh",
        "zu",
    ]
)

#: FLORES+ individual codes -> the macrolanguage code the Tatoeba Challenge uses.
_TATOEBA_MACRO: dict[str, str] = {
    "cmn": "zho", "arb": "ara", "pes": "fas", "swh": "swa", "zsm": "msa",
    "ekk": "est", "lvs": "lav", "npi": "nep", "ory": "ori", "pbt": "pus",
    "khk": "mon", "uzn": "uzb", "azj": "aze", "als": "sqi", "plt": "mlg",
    "ydd": "yid", "gaz": "orm", "kmr": "kur", "nob": "nor",
}  # fmt: skip


def sentence_id(sentence: str) -> str:
    """The id of a pair-wise corpus row: SHA-256 of the key sentence (hex, 16 chars)."""
    return hashlib.sha256(sentence.encode("utf-8", "surrogatepass")).hexdigest()[:_ID_LENGTH]


# --------------------------------------------------------------- loading
def _hub_options(revision: str | None, cache_dir: str | None, token: str | bool | None) -> dict[str, object]:
    options: dict[str, object] = {}
    if revision is not None:
        options["revision"] = revision
    if cache_dir is not None:
        options["cache_dir"] = cache_dir
    if token is not None:
        options["token"] = token
    return options


def _gate_text(dataset: str) -> str:
    return (
        f"accept its terms at https://huggingface.co/datasets/{dataset} while logged in, "
        "then run `huggingface-cli login` (or `hf auth login`) on this machine or set "
        "HF_TOKEN"
    )


class _MissingConfig(Exception):
    """The dataset has no such config; carries the original exception."""

    def __init__(self, config: str, cause: BaseException) -> None:
        super().__init__(config)
        self.config = config
        self.cause = cause


def _is_missing_config(exc: BaseException, config: str | None) -> bool:
    text = str(exc)
    return config is not None and isinstance(exc, ValueError) and "config" in text.lower() and config in text


def _load(
    label: str,
    dataset: str,
    config: str | None,
    split: str,
    options: Mapping[str, object],
    gated: bool = False,
) -> object:
    """``datasets.load_dataset``; a missing config raises :class:`_MissingConfig`,
    anything else a :class:`CorpusError` that says what to do."""
    try:
        import datasets
    except ImportError as exc:
        raise CorpusError(
            f"loading {label} needs the 'datasets' package ({exc}); `pip install datasets`, "
            f"or use another source: {offline_alternatives()}"
        ) from exc
    args: tuple[object, ...] = (dataset,) if config is None else (dataset, config)
    try:
        return datasets.load_dataset(*args, split=split, **options)
    except Exception as exc:  # network, offline mode, gating, missing config, ...
        if _is_missing_config(exc, config):
            raise _MissingConfig(str(config), exc) from exc
        if gated or _is_gated(exc):
            gate = f"{dataset} is a gated dataset"
            if _is_gated(exc):
                raise CorpusError(
                    f"{gate} and this machine has no access to it ({_describe(exc)}); "
                    f"{_gate_text(dataset)}; or use an offline source: {offline_alternatives()}"
                ) from exc
            raise CorpusError(
                f"cannot load {label} ({dataset}, split {split}) from the Hugging Face Hub or "
                f"its local cache ({_describe(exc)}). {gate}: to use it, {_gate_text(dataset)}; "
                f"without the Hub, {offline_alternatives()}"
            ) from exc
        where = dataset if config is None else f"{dataset} ({config}"
        where += f", split {split})" if config is not None else f" (split {split})"
        raise CorpusError(
            f"cannot load {where} from the Hugging Face Hub or its local cache "
            f"({_describe(exc)}); if you are online check the network and HF_HUB_OFFLINE, "
            f"otherwise {offline_alternatives()}"
        ) from exc


def _columns(table: object) -> list[str]:
    columns = getattr(table, "column_names", None)
    if columns is None and isinstance(table, Sequence) and table and isinstance(table[0], Mapping):
        columns = list(table[0])
    return [str(c) for c in (columns or [])]


def _rows(table: object) -> Iterable[Mapping[str, object]]:
    """Rows of a ``datasets.Dataset`` or of a list of dicts."""
    return iter(table)  # type: ignore[call-overload]


def _clean(value: object) -> str:
    return "" if value is None else str(value).strip()


def _codes(languages: Sequence[str] | str, label: str) -> list[str]:
    if isinstance(languages, str):
        languages = [languages]
    codes: list[str] = []
    for language in languages:
        code = normalize_language(language)
        if code in codes:
            raise CorpusError(f"language {code} is listed twice; list each language once")
        codes.append(code)
    if not codes:
        raise LanguageError(f"{label} needs languages, e.g. ['eng_Latn', 'deu_Latn']")
    return codes


def _check_min_chars(min_chars: int) -> int:
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 0:
        raise CorpusError(f"min_chars must be a non-negative integer, got {min_chars!r}")
    return min_chars


# ------------------------------------------------------- pair-wise corpora
_Extract = Callable[[object, str, str, str], list[tuple[str, str]]]


def _pairs_translation(table: object, first: str, second: str, where: str) -> list[tuple[str, str]]:
    """Rows ``{"translation": {first: ..., second: ...}}`` -> (first, second) texts."""
    columns = _columns(table)
    if "translation" not in columns:
        raise CorpusError(
            f"{where} has no 'translation' column (found {', '.join(columns) or 'none'}); "
            "expected the OPUS-100 layout {'translation': {'de': ..., 'en': ...}}"
        )
    out: list[tuple[str, str]] = []
    for row in _rows(table):
        pair = row["translation"]
        if not isinstance(pair, Mapping) or first not in pair or second not in pair:
            keys = ", ".join(map(str, pair)) if isinstance(pair, Mapping) else type(pair).__name__
            raise CorpusError(
                f"{where}: a translation row has keys {keys}, expected {first} and {second}; "
                "use `codes:` to give the dataset's language codes"
            )
        out.append((_clean(pair[first]), _clean(pair[second])))
    return out


def _pairs_tatoeba(table: object, first: str, second: str, where: str) -> list[tuple[str, str]]:
    """Tatoeba Challenge rows (``sourceString`` is the config's first language)."""
    columns = _columns(table)
    if "sourceString" in columns and "targetString" in columns:
        return [(_clean(r["sourceString"]), _clean(r["targetString"])) for r in _rows(table)]
    if "translation" in columns:
        return _pairs_translation(table, first, second, where)
    raise CorpusError(
        f"{where} has neither sourceString/targetString nor a translation column "
        f"(found {', '.join(columns) or 'none'}); point `dataset:` at a dataset with the "
        "Helsinki-NLP/tatoeba_mt layout"
    )


def _available_from(exc: BaseException, code: str, tried: Sequence[str]) -> list[str]:
    """Language codes paired with ``code`` in a 'config not found' message."""
    found: set[str] = set()
    for a, b in re.findall(r"'([A-Za-z_]+)-([A-Za-z_]+)'", str(exc)):
        if f"{a}-{b}" in tried:
            continue
        if a == code:
            found.add(b)
        elif b == code:
            found.add(a)
    return sorted(found)


def _load_pairwise(
    *,
    label: str,
    name: str,
    languages: Sequence[str] | str,
    dataset: str,
    split: str,
    min_chars: int,
    candidates: Callable[[str], list[str]],
    extract: _Extract,
    known: Sequence[str] | None,
    options: Mapping[str, object],
) -> ParallelCorpus:
    codes = _codes(languages, label)
    min_chars = _check_min_chars(min_chars)
    if len(codes) < 2:
        raise LanguageError(
            f"{label} is a pair-wise corpus: give at least two languages, e.g. "
            f"['{PIVOT}', '{codes[0] if codes[0] != PIVOT else 'deu_Latn'}']"
        )
    direct = len(codes) == 2 and PIVOT not in codes

    def load_pair(a: str, b: str) -> tuple[str, dict[str, str], int]:
        """(key language, key text -> other text, rows read) for the pair a-b."""
        tried: list[str] = []
        last: _MissingConfig | None = None
        for code_a in candidates(a):
            for code_b in candidates(b):
                first, second = sorted((code_a, code_b))
                config = f"{first}-{second}"
                if config in tried:
                    continue
                tried.append(config)
                try:
                    table = _load(label, dataset, config, split, options)
                except _MissingConfig as missing:
                    last = missing
                    continue
                rows = extract(table, first, second, f"{dataset} ({config}, split {split})")
                lang_first = a if first == code_a else b
                key_lang = PIVOT if not direct else lang_first
                kept: dict[str, str] = {}
                for text_first, text_second in rows:
                    if len(text_first) < min_chars or len(text_second) < min_chars:
                        continue
                    key, other = (text_first, text_second) if key_lang == lang_first else (text_second, text_first)
                    kept.setdefault(key, other)  # identical key sentences: the first row wins
                return key_lang, kept, len(rows)
        pivot_code = candidates(PIVOT)[0] if not direct else candidates(a)[0]
        available = _available_from(last.cause, pivot_code, tried) if last is not None else []
        if not available and known is not None:
            available = [c for c in known if c != pivot_code]
        detail = _describe(last.cause) if last is not None else "no config tried"
        raise LanguageError(
            f"{label} ({dataset}) has no pair {a}-{b} (tried config(s) {', '.join(tried)}; "
            f"{detail}); languages available with {pivot_code}: "
            f"{', '.join(available) or 'see the dataset page'}. Check the code, or map it "
            f"with `codes: {{{b}: <dataset code>}}`"
        ) from (last.cause if last is not None else None)

    loaded: list[tuple[str, str, str, dict[str, str], int]] = []
    if direct:
        try:
            loaded = [(codes[0], codes[1], *load_pair(codes[0], codes[1]))]
        except LanguageError:  # no direct pair: join the two through English
            direct = False
    if not loaded:
        loaded = [(PIVOT, c, *load_pair(PIVOT, c)) for c in codes if c != PIVOT]
    key_lang = loaded[0][2]
    common = set(loaded[0][3])
    for *_, kept, _n in loaded[1:]:
        common &= set(kept)
    if not common:
        counts = "; ".join(
            f"{a}-{b}: {len(kept)} of {n} rows with >= {min_chars} characters per side" for a, b, _k, kept, n in loaded
        )
        join = "" if len(loaded) == 1 else f" and sharing their {key_lang} sentence across all pairs"
        raise CorpusError(
            f"{label} ({dataset}, split {split}) has no rows with at least {min_chars} "
            f"characters per side{join} ({counts}); lower `min_chars`, use fewer "
            "languages, or another split"
        )
    keys = sorted(common, key=sentence_id)
    ids = tuple(sentence_id(k) for k in keys)
    texts: dict[str, tuple[str, ...]] = {}
    for code in codes:
        if code == key_lang:
            texts[code] = tuple(keys)
            continue
        kept = next(k for a, b, _key, k, _n in loaded if code in (a, b))
        texts[code] = tuple(kept[k] for k in keys)
    return ParallelCorpus(f"{name}:{split}", ids, texts)


def _override(codes: Mapping[str, str] | None) -> dict[str, str]:
    if codes is None:
        return {}
    if not isinstance(codes, Mapping):
        raise CorpusError(f"codes must map language codes to dataset codes, got {codes!r}")
    return {normalize_language(k): str(v) for k, v in codes.items()}


def load_opus100(
    languages: Sequence[str],
    split: str = "test",
    min_chars: int = 50,
    dataset: str = OPUS100_DATASET,
    codes: Mapping[str, str] | None = None,
    revision: str | None = None,
    cache_dir: str | None = None,
    token: str | bool | None = None,
) -> ParallelCorpus:
    """OPUS-100 sentences of ``split``, joined on English across ``languages``.

    Args:
        languages: FLORES+ codes (``deu_Latn``); mapped to ISO 639-1 (``de``).
        split: ``"test"`` (default), ``"validation"`` or ``"train"``.
        min_chars: keep a pair row only if both sides have this many characters.
        dataset: Hub dataset id (a mirror with the same layout works).
        codes: override the code mapping, e.g. ``{"nob_Latn": "no"}``.
        revision, cache_dir, token: passed to ``datasets.load_dataset``.

    Raises:
        CorpusError: Hub unreachable (names offline sources), no rows left.
        LanguageError: a language without an OPUS-100 pair (lists the available ones).
    """
    override = _override(codes)

    def candidates(code: str) -> list[str]:
        if code in override:
            return [override[code]]
        iso1 = _ISO1.get(code.split("_")[0])
        if iso1 is None:
            raise LanguageError(
                f"OPUS-100 has no language {code} (no ISO 639-1 code known for it); "
                f"its languages: {', '.join(OPUS100_LANGUAGES)}; map it with "
                f"`codes: {{{code}: <code>}}` if the dataset has it"
            )
        return [iso1]

    return _load_pairwise(
        label="OPUS-100",
        name="opus100",
        languages=languages,
        dataset=dataset,
        split=split,
        min_chars=min_chars,
        candidates=candidates,
        extract=_pairs_translation,
        known=OPUS100_LANGUAGES,
        options=_hub_options(revision, cache_dir, token),
    )


def load_tatoeba(
    languages: Sequence[str],
    split: str = "test",
    min_chars: int = 50,
    dataset: str = TATOEBA_DATASET,
    codes: Mapping[str, str] | None = None,
    revision: str | None = None,
    cache_dir: str | None = None,
    token: str | bool | None = None,
) -> ParallelCorpus:
    """Tatoeba Challenge sentences of ``split``, joined on English across ``languages``.

    Args:
        languages: FLORES+ codes (``deu_Latn``); mapped to the challenge's ISO 639-3
            codes (``deu``; macrolanguages such as ``cmn_Hans -> zho``).
        split: ``"test"`` (default) or ``"validation"``.
        min_chars: keep a pair row only if both sides have this many characters.
        dataset: Hub dataset id (a mirror with the same layout works).
        codes: override the code mapping, e.g. ``{"cmn_Hans": "cmn"}``.
        revision, cache_dir, token: passed to ``datasets.load_dataset``.

    Raises:
        CorpusError: Hub unreachable (names offline sources), no rows left.
        LanguageError: a pair the dataset lacks (lists the available ones).
    """
    override = _override(codes)

    def candidates(code: str) -> list[str]:
        if code in override:
            return [override[code]]
        lang = code.split("_")[0]
        return list(dict.fromkeys([_TATOEBA_MACRO.get(lang, lang), lang]))

    return _load_pairwise(
        label="Tatoeba",
        name="tatoeba",
        languages=languages,
        dataset=dataset,
        split=split,
        min_chars=min_chars,
        candidates=candidates,
        extract=_pairs_tatoeba,
        known=None,
        options=_hub_options(revision, cache_dir, token),
    )


# ----------------------------------------------------------------- BouQUET
_BOUQUET_IDS = ("uniq_id", "id", "sentence_id")
_BOUQUET_LANGS = ("lang", "language", "lang_code")
_BOUQUET_TEXTS = ("text", "sentence")
_PAIR_COLUMNS = ("src_lang", "src_text", "tgt_lang", "tgt_text")


def _pick(columns: list[str], given: str | None, defaults: tuple[str, ...], what: str, where: str) -> str:
    if given is not None:
        if given not in columns:
            raise CorpusError(f"{where} has no {what} column {given!r}; its columns: {', '.join(columns)}")
        return given
    found = next((c for c in defaults if c in columns), None)
    if found is None:
        raise CorpusError(
            f"{where} has no {what} column: expected one of {', '.join(defaults)}, found "
            f"{', '.join(columns) or 'none'}; name it with the `{what}_column` option"
        )
    return found


def _language_key(value: object) -> str:
    text = _clean(value)
    try:
        return normalize_language(text)
    except LanguageError:
        return text


def _id_order(value: str) -> tuple[int, int, str]:
    return (0, int(value), value) if value.isdigit() else (1, 0, value)


def load_bouquet(
    languages: Sequence[str],
    split: str = "test",
    min_chars: int = 0,
    dataset: str = BOUQUET_DATASET,
    config: str | None = None,
    id_column: str | None = None,
    language_column: str | None = None,
    text_column: str | None = None,
    revision: str | None = None,
    cache_dir: str | None = None,
    token: str | bool | None = None,
) -> ParallelCorpus:
    """BouQUET sentences of ``split`` for ``languages``, aligned on the shared id.

    Args:
        languages: FLORES+ codes (``eng_Latn``).
        split: a split of the dataset (``"test"`` by default; ``"dev"`` also assumed).
        min_chars: drop sentence ids where any requested language is shorter.
        dataset, config: Hub dataset id and config (``None``: the default one).
        id_column, language_column, text_column: column names (default: detected,
            see the module docstring); ignored for the src/tgt pair layout.
        revision, cache_dir, token: passed to ``datasets.load_dataset``.

    Raises:
        CorpusError: gated without access or offline (the message names the gate
            and the offline sources), unknown columns, nothing aligned.
        LanguageError: a language the dataset lacks (lists the available ones).
    """
    codes = _codes(languages, "BouQUET")
    min_chars = _check_min_chars(min_chars)
    options = _hub_options(revision, cache_dir, token)
    try:
        table = _load("BouQUET", dataset, config, split, options, gated=True)
    except _MissingConfig as missing:
        raise CorpusError(
            f"{dataset} has no config {config!r} ({_describe(missing.cause)}); leave `config` unset for the default one"
        ) from missing.cause
    where = f"{dataset}, split {split}"
    columns = _columns(table)
    by_language: dict[str, dict[str, str]] = {}

    def add(row_id: object, language: object, text: object) -> None:
        by_language.setdefault(_language_key(language), {}).setdefault(_clean(row_id), _clean(text))

    if all(c in columns for c in _PAIR_COLUMNS) and (language_column is None and text_column is None):
        id_col = _pick(columns, id_column, _BOUQUET_IDS, "id", f"BouQUET ({where})")
        for row in _rows(table):
            add(row[id_col], row["src_lang"], row["src_text"])
            add(row[id_col], row["tgt_lang"], row["tgt_text"])
    else:
        id_col = _pick(columns, id_column, _BOUQUET_IDS, "id", f"BouQUET ({where})")
        lang_col = _pick(columns, language_column, _BOUQUET_LANGS, "language", f"BouQUET ({where})")
        text_col = _pick(columns, text_column, _BOUQUET_TEXTS, "text", f"BouQUET ({where})")
        for row in _rows(table):
            add(row[id_col], row[lang_col], row[text_col])
    missing_languages = [c for c in codes if c not in by_language]
    if missing_languages:
        raise LanguageError(
            f"BouQUET ({where}) has no {', '.join(missing_languages)}; available: "
            f"{', '.join(sorted(by_language)) or 'none'}"
        )
    common = set(by_language[codes[0]])
    for code in codes[1:]:
        common &= set(by_language[code])
    common = {i for i in common if i and all(len(by_language[c][i]) >= max(min_chars, 1) for c in codes)}
    if not common:
        raise CorpusError(
            f"BouQUET ({where}) has no sentence id shared by {', '.join(codes)} with non-empty "
            f"text of at least {min_chars} characters; check the id column or lower `min_chars`"
        )
    ids = tuple(sorted(common, key=_id_order))
    texts = {code: tuple(by_language[code][i] for i in ids) for code in codes}
    return ParallelCorpus(f"bouquet:{split}", ids, texts)
