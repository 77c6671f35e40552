"""URIEL typological distances between languages, offline, from the data ``lang2vec`` ships.

Six kinds of distance, each the cosine distance ``1 - u.v / (|u| |v|)`` between
two languages' URIEL vectors (Littell et al., 2017):

==============  ==========================================  =========================
kind            lang2vec feature set                        file in ``lang2vec/data``
==============  ==========================================  =========================
syntactic       ``syntax_knn`` (103 features)               feature_predictions.npz
phonological    ``phonology_knn`` (28)                      feature_predictions.npz
inventory       ``inventory_knn`` (158)                     feature_predictions.npz
featural        ``syntax_knn+phonology_knn+inventory_knn``  feature_predictions.npz
genetic         ``fam`` (3,718 Glottolog family nodes)      family_features.npz
geographic      ``geo`` (distances to 299 points on Earth)  geocoord_features.npz
==============  ==========================================  =========================

The ``*_knn`` sets are URIEL's k-nearest-neighbour predictions: every language
has a complete vector, observed values (WALS, SSWL, Ethnologue, PHOIBLE) filled
in from typologically and genetically close languages. A language with few
observed features therefore gets a mostly imputed vector;
:func:`uriel_coverage` counts what is observed.

Which source, and why
---------------------
``lang2vec`` 1.1.2 (the PyPI release; the data are URIEL's 2017 release) was
chosen over ``urielplus`` 1.3.2:

* Values. Cosine distance on ``syntax_knn`` reproduces seed 000's quoted URIEL
  syntactic distances from English to four decimals (nld 0.0757, spa 0.1784,
  pol 0.2136, ell 0.2169). ``urielplus`` ships no kNN predictions: its
  syntactic distance is computed on the observed features only (union over
  WALS/SSWL/Ethnologue, features both languages have), angular by default,
  and gives eng-nld/spa/pol/ell 0.3625/0.3936/0.5162/0.4769 (angular) or
  0.1578/0.1851/0.3112/0.2677 (cosine); its phonological distance fails for
  eng-nld ("no shared phonological features"). Its ``fam``, ``geo`` and
  observed-feature files are byte-identical to lang2vec's, so the genetic and
  geographic distances agree (the tests check this when it is installed).
* Offline. Both wheels carry their data. But ``urielplus`` copies its data
  into its own installation folder on first use (which fails on a read-only
  install) and configures the root logger when imported; ``lang2vec`` 1.1.2's
  module needs ``pkg_resources``, which setuptools removed (>= 81). So
  interlingua imports neither: it finds the installed ``lang2vec`` package
  with :func:`importlib.util.find_spec` (which runs none of its code) and
  reads the ``.npz`` files with numpy, selecting features exactly as
  ``lang2vec.get_features`` does (the tests compare with it).
* Maintenance. ``lang2vec`` is frozen (last release 2021), which is what a
  fixed reference needs: the numbers cannot move under a result.

``lang2vec``'s precomputed ``distance()`` (GitHub versions only, not the PyPI
wheel) reads a ``distances.zip`` downloaded at install time, so it is not
available offline; it is also a different computation: its README gives
``distance("syntactic", "eng", "fra") = 0.4569`` where cosine on
``syntax_knn`` gives 0.1882 (and angular 0.3970, urielplus 0.2103).
Toossi et al. (2024) report that how URIEL's precomputed distances were
computed is not documented well enough to reproduce them. The numbers here
are the ones named above, nothing else; the ``source`` column says so.

Language codes
--------------
A code is first normalised with :func:`interlingua.data.corpora.normalize_language`
(``eng_Latn``, ``eng_latn``, ``zho_Hans -> cmn_Hans``, ``tgl -> fil_Latn``);
its ISO 639-3 part is the URIEL code (URIEL has no scripts: ``cmn_Hans`` and
``cmn_Hant`` are the same language to it). A bare ISO 639-3 code that
``normalize_language`` cannot place (``ara``, ``nep``) is used as it is.
Then :data:`URIEL_REMAPS` applies: where URIEL's entry for a FLORES
individual-language code has fewer than 20 of the 103 syntactic features
observed and the macrolanguage entry (where WALS and SSWL file the data) has
more, the macrolanguage entry is used, e.g. ``lvs`` (0 observed) -> ``lav``
(79), ``npi`` (16) -> ``nep`` (69), ``fil`` (0) -> ``tgl`` (74). Mandarin stays
``cmn`` (94 observed; the macrolanguage ``zho`` has 102 but only the top
node of the family tree). Pass ``remap=False`` to use the code as written.

Caching: the three tables load in well under a second and a distance takes
microseconds, so results are cached in memory only (:func:`functools.lru_cache`),
nothing is written under the store root.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import math
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from interlingua.core.errors import InterlinguaError, LanguageError
from interlingua.core.languages import normalize_language

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "KINDS",
    "KIND_ALIASES",
    "URIEL_REMAPS",
    "TypologyError",
    "TypologyWarning",
    "uriel_code",
    "uriel_coverage",
    "uriel_distance",
    "uriel_distances",
    "uriel_languages",
    "uriel_source",
]

INSTALL_HINT = "pip install 'interlingua[typology]' (or: pip install 'lang2vec==1.1.2')"


class TypologyError(InterlinguaError, ValueError):
    """A typology query cannot be answered: unknown language or kind, or the data are not installed."""


class TypologyWarning(UserWarning):
    """A distance is undefined (NaN): a language's URIEL vector is all zeros."""


#: The distances, in the order :func:`uriel_distances` gives them by default.
KINDS: tuple[str, ...] = ("syntactic", "genetic", "geographic", "phonological", "inventory", "featural")

#: lang2vec feature-set names accepted for the kinds.
KIND_ALIASES: dict[str, str] = {
    "syntax_knn": "syntactic",
    "fam": "genetic",
    "geo": "geographic",
    "phonology_knn": "phonological",
    "inventory_knn": "inventory",
    "syntax_knn+phonology_knn+inventory_knn": "featural",
}

#: FLORES individual-language code -> URIEL macrolanguage entry, where URIEL's entry
#: for the individual code has < 20 of 103 syntactic features observed and the
#: macrolanguage entry has more (observed counts in the comments; the tests check
#: each against the data). ``fil -> tgl``: Filipino is standardised Tagalog.
URIEL_REMAPS: dict[str, str] = {
    "aeb": "ara",  # Tunisian Arabic 3 -> 98
    "acq": "ara",  # Ta'izzi-Adeni Arabic 0 -> 98
    "ajp": "ara",  # South Levantine Arabic 0 -> 98
    "ars": "ara",  # Najdi Arabic 12 -> 98
    "azj": "aze",  # North Azerbaijani 0 -> 55
    "bjn": "msa",  # Banjar 0 -> 101
    "ckb": "kur",  # Central Kurdish 16 -> 71
    "dik": "din",  # Southwestern Dinka 0 -> 67
    "fil": "tgl",  # Filipino 0 -> 74
    "fuv": "ful",  # Nigerian Fulfulde 1 -> 86
    "gaz": "orm",  # West Central Oromo 13 -> 73
    "hrv": "hbs",  # Croatian 12 -> 66
    "ltg": "lav",  # Latgalian 0 -> 79
    "lvs": "lav",  # Standard Latvian 0 -> 79
    "nno": "nor",  # Norwegian Nynorsk 0 -> 68
    "npi": "nep",  # Nepali (individual) 16 -> 69
    "ory": "ori",  # Odia 0 -> 50
    "pbt": "pus",  # Southern Pashto 0 -> 75
    "prs": "fas",  # Dari 1 -> 85
    "quy": "que",  # Ayacucho Quechua 14 -> 82
    "ydd": "yid",  # Eastern Yiddish 12 -> 29
    "zsm": "msa",  # Standard Malay 12 -> 101
}


@dataclass(frozen=True)
class _Spec:
    file: str
    source: str
    prefixes: tuple[str, ...]
    feature_set: str


_SPECS: dict[str, _Spec] = {
    "syntactic": _Spec("feature_predictions.npz", "predicted", ("S_",), "syntax_knn"),
    "phonological": _Spec("feature_predictions.npz", "predicted", ("P_",), "phonology_knn"),
    "inventory": _Spec("feature_predictions.npz", "predicted", ("INV_",), "inventory_knn"),
    "featural": _Spec(
        "feature_predictions.npz", "predicted", ("S_", "P_", "INV_"), "syntax_knn+phonology_knn+inventory_knn"
    ),
    "genetic": _Spec("family_features.npz", "FAM", ("",), "fam"),
    "geographic": _Spec("geocoord_features.npz", "GEOCOORDS", ("",), "geo"),
}
#: Observed (not imputed) features: the typological kinds' prefixes in features.npz.
_OBSERVED_FILE = "features.npz"
_BARE_CODE = re.compile(r"^[A-Za-z]{3}$")


@lru_cache(maxsize=1)
def _data_dir() -> Path:
    """``lang2vec/data`` of the installed package, found without importing it.

    The distribution's own file list comes first: lang2vec also installs a
    script ``bin/lang2vec.py``, which a console script (whose ``sys.path[0]`` is
    ``bin``) would find as a module named ``lang2vec`` before the package.
    """
    try:
        dist = importlib.metadata.distribution("lang2vec")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        folder = Path(str(dist.locate_file("lang2vec/data")))
        if (folder / "feature_predictions.npz").is_file():
            return folder
    try:
        spec = importlib.util.find_spec("lang2vec")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TypologyError(
            f"URIEL distances need the 'lang2vec' package (its data), which is not installed: {INSTALL_HINT}"
        )
    for location in spec.submodule_search_locations:
        folder = Path(location) / "data"
        if (folder / "feature_predictions.npz").is_file():
            return folder
    raise TypologyError(
        f"lang2vec is installed but has no data/feature_predictions.npz under "
        f"{list(spec.submodule_search_locations)}; reinstall it: {INSTALL_HINT}"
    )


@lru_cache(maxsize=1)
def uriel_source() -> str:
    """Where the numbers come from, e.g. ``"URIEL via lang2vec 1.1.2"`` (the ``source`` column)."""
    _data_dir()
    try:
        version = importlib.metadata.version("lang2vec")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        version = "unknown version"
    return f"URIEL via lang2vec {version}"


@dataclass(frozen=True)
class _Table:
    index: dict[str, int]
    matrix: np.ndarray  # languages x features (float32 as stored; bool for 'fam')


def _load(file: str) -> dict[str, np.ndarray]:
    path = _data_dir() / file
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise TypologyError(f"cannot read {path} ({exc}); reinstall lang2vec: {INSTALL_HINT}") from None


@cache
def _table(kind: str) -> _Table:
    """The kind's vectors, selected as ``lang2vec.get_features`` selects its feature set."""
    spec = _SPECS[kind]
    data = _load(spec.file)
    feats = [str(f) for f in data["feats"]]
    columns = [i for i, name in enumerate(feats) if name.startswith(spec.prefixes)]
    sources = [str(s) for s in data["sources"]]
    matrix = data["data"][:, columns, sources.index(spec.source)]
    if kind == "genetic":  # 0/1 family membership: 7,970 x 3,718 is 30 MB as bool, 118 MB as float32
        matrix = matrix != 0
    index = {str(code): i for i, code in enumerate(data["langs"])}
    return _Table(index=index, matrix=matrix)


@lru_cache(maxsize=1)
def uriel_languages() -> frozenset[str]:
    """The ISO 639-3 codes URIEL has vectors for (7,970)."""
    return frozenset(_table("syntactic").index)


def _kind(kind: str) -> str:
    if not isinstance(kind, str):
        raise TypologyError(f"kind must be a string, one of {', '.join(KINDS)}; got {kind!r}")
    name = KIND_ALIASES.get(kind.strip(), kind.strip().lower())
    if name not in _SPECS:
        near = difflib.get_close_matches(name, [*KINDS, *KIND_ALIASES], n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise TypologyError(f"unknown URIEL distance kind {kind!r}{hint}; choose from {', '.join(KINDS)}")
    return name


def _parse(language: str) -> tuple[str, str]:
    """``(label, iso)``: the FLORES-style code (or the bare code) and its ISO 639-3 part."""
    if not isinstance(language, str):
        raise TypologyError(
            f"language code must be a string like 'eng_Latn', got {language!r} ({type(language).__name__})"
        )
    text = language.strip()
    try:
        flores = normalize_language(text)
    except LanguageError as exc:
        if _BARE_CODE.match(text):
            return text.lower(), text.lower()
        raise TypologyError(str(exc)) from None
    return flores, flores.split("_", 1)[0]


def _nearest(code: str, limit: int = 5) -> list[str]:
    return difflib.get_close_matches(code, sorted(uriel_languages()), n=limit, cutoff=0.6)


def uriel_code(language: str, *, remap: bool = True) -> str:
    """The URIEL (ISO 639-3) code for ``language`` (``eng_Latn -> eng``, ``zho_Hans -> cmn``, ``lvs_Latn -> lav``).

    Raises:
        TypologyError: the code cannot be parsed, or URIEL has no such language
            (the message names the nearest codes it has).
    """
    label, iso = _parse(language)
    code = URIEL_REMAPS.get(iso, iso) if remap else iso
    if code not in uriel_languages():
        near = _nearest(code)
        hint = f"; nearest URIEL codes: {', '.join(near)}" if near else ""
        shown = f"{language!r} -> {code!r}" if code != language else repr(language)
        raise TypologyError(f"URIEL has no language {shown} ({uriel_source()}){hint}")
    return code


@lru_cache(maxsize=65536)
def _pair_distance(code_a: str, code_b: str, kind: str) -> float:
    # code_a <= code_b (the callers sort), so both orders share one entry and one value
    if code_a == code_b:
        return 0.0
    table = _table(kind)
    u = table.matrix[table.index[code_a]].astype(np.float64)
    v = table.matrix[table.index[code_b]].astype(np.float64)
    norm_u, norm_v = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if norm_u == 0.0 or norm_v == 0.0:
        empty = [c for c, n in ((code_a, norm_u), (code_b, norm_v)) if n == 0.0]
        warnings.warn(
            f"URIEL {kind} distance {code_a}-{code_b} is undefined (NaN): the {_SPECS[kind].feature_set} "
            f"vector of {', '.join(empty)} is all zeros (for 'fam': no family node listed, e.g. an isolate "
            "or an unclassified code)",
            TypologyWarning,
            stacklevel=3,
        )
        return math.nan
    cosine = float(np.dot(u, v)) / (norm_u * norm_v)
    return max(0.0, 1.0 - cosine)


def uriel_distance(lang_a: str, lang_b: str, kind: str = "syntactic", *, remap: bool = True) -> float:
    """Cosine distance between two languages' URIEL vectors of ``kind`` (see the module docstring).

    Symmetric; 0.0 for the same language (also ``zho_Hans`` vs ``cmn_Hant``);
    NaN (with a :class:`TypologyWarning`) when a vector is all zeros. Accepts
    FLORES-style codes (``eng_Latn``), Goldfish codes, bare ISO 639-3 codes,
    and the lang2vec names of the kinds (``syntax_knn``, ``fam``, ``geo``).

    Example: ``uriel_distance("eng_Latn", "nld_Latn")`` -> 0.0757...
    """
    name = _kind(kind)
    a, b = sorted((uriel_code(lang_a, remap=remap), uriel_code(lang_b, remap=remap)))
    return _pair_distance(a, b, name)


def uriel_distances(languages: Iterable[str], kinds: Sequence[str] = KINDS, *, remap: bool = True) -> pd.DataFrame:
    """One row per unordered pair of ``languages`` (in the order given), one column per kind.

    Columns: ``lang_a``, ``lang_b`` (normalised FLORES-style codes, or the bare
    code as given), ``uriel_a``, ``uriel_b`` (the URIEL codes used), one float
    column per kind (named as in :data:`KINDS`), and ``source``. A language
    listed twice (after normalising) is kept once.
    """
    import pandas as pd

    if isinstance(languages, str):
        raise TypologyError("languages must be a list of codes, e.g. ['eng_Latn', 'deu_Latn'], not one string")
    if isinstance(kinds, str):
        kinds = [kinds]
    names = [_kind(k) for k in kinds]
    if not names:
        raise TypologyError(f"kinds is empty; choose from {', '.join(KINDS)}")
    if len(set(names)) != len(names):
        raise TypologyError(f"kinds lists a distance twice: {list(kinds)}")
    labelled: dict[str, str] = {}
    for language in languages:
        label, _ = _parse(language)
        if label not in labelled:
            labelled[label] = uriel_code(language, remap=remap)
    if len(labelled) < 2:
        raise TypologyError(f"uriel_distances needs at least two different languages, got {list(labelled)}")
    items = list(labelled.items())
    source = uriel_source()
    rows = []
    for i, (label_a, code_a) in enumerate(items):
        for label_b, code_b in items[i + 1 :]:
            lo, hi = sorted((code_a, code_b))
            row: dict[str, object] = {"lang_a": label_a, "lang_b": label_b, "uriel_a": code_a, "uriel_b": code_b}
            for name in names:
                row[name] = _pair_distance(lo, hi, name)
            row["source"] = source
            rows.append(row)
    return pd.DataFrame(rows, columns=["lang_a", "lang_b", "uriel_a", "uriel_b", *names, "source"])


_TYPOLOGICAL = ("syntactic", "phonological", "inventory", "featural")


@cache
def _observed() -> tuple[dict[str, int], dict[str, np.ndarray], dict[str, int]]:
    """Per kind: how many features of each language some source observed, and the kind's size."""
    data = _load(_OBSERVED_FILE)
    known = (data["data"] != -1.0).any(axis=2)  # languages x features: any source has a value
    feats = [str(f) for f in data["feats"]]
    masks = {kind: np.array([f.startswith(_SPECS[kind].prefixes) for f in feats]) for kind in _TYPOLOGICAL}
    index = {str(code): i for i, code in enumerate(data["langs"])}
    counts = {kind: known[:, mask].sum(axis=1) for kind, mask in masks.items()}
    return index, counts, {kind: int(mask.sum()) for kind, mask in masks.items()}


def uriel_coverage(language: str, *, remap: bool = True) -> dict[str, tuple[int, int]]:
    """How much of ``language``'s URIEL vectors is data rather than kNN imputation.

    ``{kind: (observed, total)}`` for the typological kinds (features with a
    value in any of WALS, SSWL, Ethnologue, PHOIBLE), and for ``genetic`` the
    number of family-tree nodes listed (0: a distance to it is NaN).
    """
    code = uriel_code(language, remap=remap)
    index, counts, totals = _observed()
    result = {kind: (int(counts[kind][index[code]]), totals[kind]) for kind in _TYPOLOGICAL}
    fam = _table("genetic")
    row = fam.matrix[fam.index[code]]
    result["genetic"] = (int(np.count_nonzero(row)), int(row.size))
    return result
