"""URIEL distances: seed 000's values, symmetry, identity, code mapping, errors, and agreement
with lang2vec's own ``get_features`` and with urielplus (same URIEL files) where installed."""

from __future__ import annotations

import importlib
import math
import os
import sys
import types
import warnings

import numpy as np
import pytest

pytest.importorskip("lang2vec")

from interlingua.analysis.typology import (  # noqa: E402
    KINDS,
    URIEL_REMAPS,
    TypologyError,
    TypologyWarning,
    uriel_code,
    uriel_coverage,
    uriel_distance,
    uriel_distances,
    uriel_languages,
)
from interlingua.analysis.typology.uriel import _observed  # noqa: E402
from interlingua.core.errors import InterlinguaError  # noqa: E402

#: Seed 000: URIEL syntax_knn cosine distance from English.
SEED_000 = {"nld_Latn": 0.0757, "spa_Latn": 0.1784, "pol_Latn": 0.2136, "ell_Grek": 0.2169}


@pytest.mark.parametrize(("language", "expected"), sorted(SEED_000.items()))
def test_seed_000_syntactic_distances_from_english(language: str, expected: float) -> None:
    assert round(uriel_distance("eng_Latn", language, "syntactic"), 4) == expected
    assert round(uriel_distance("eng_Latn", language, "syntax_knn"), 4) == expected  # lang2vec's name


@pytest.mark.slow
def test_symmetric_and_identity_zero() -> None:
    langs = ["eng_Latn", "deu_Latn", "rus_Cyrl", "cmn_Hans", "jpn_Jpan"]
    for kind in KINDS:
        for a in langs:
            assert uriel_distance(a, a, kind) == 0.0
            for b in langs:
                assert uriel_distance(a, b, kind) == uriel_distance(b, a, kind)
                if a != b:
                    assert 0.0 < uriel_distance(a, b, kind) <= 1.0


def test_code_mapping() -> None:
    assert uriel_code("eng_Latn") == "eng"
    assert uriel_code("eng_latn") == "eng"  # Goldfish spelling
    assert uriel_code("eng") == "eng"
    assert uriel_code("cmn_Hans") == uriel_code("cmn_Hant") == uriel_code("zho_Hans") == "cmn"
    assert uriel_code("ara") == "ara"  # bare code normalize_language cannot place
    assert uriel_code("lvs_Latn") == "lav"
    assert uriel_code("lvs_Latn", remap=False) == "lvs"
    assert uriel_distance("zho_Hans", "cmn_Hant", "featural") == 0.0
    assert uriel_distance("eng_Latn", "zho_Hans") == uriel_distance("eng", "cmn_Hans")


def test_remaps_follow_the_stated_rule() -> None:
    """Each remap: the individual code has < 20 observed syntactic features, the macrolanguage more."""
    index, counts, _ = _observed()
    for individual, macro in URIEL_REMAPS.items():
        have, target = counts["syntactic"][index[individual]], counts["syntactic"][index[macro]]
        assert have < 20 and target > have, (individual, macro, have, target)
    # and the FLORES codes that stay: enough observed features of their own
    for kept in ("arb", "cmn", "pes", "swh", "uzn", "khk", "ekk", "yue"):
        assert counts["syntactic"][index[kept]] >= 20


def test_unknown_code_names_the_nearest() -> None:
    with pytest.raises(TypologyError, match="nearest URIEL codes: .*qqs") as info:
        uriel_code("qqq_Latn")
    assert isinstance(info.value, InterlinguaError) and isinstance(info.value, ValueError)
    with pytest.raises(TypologyError, match="cannot parse"):
        uriel_distance("english", "eng_Latn")
    with pytest.raises(TypologyError, match="unknown URIEL distance kind 'syntax'.*syntactic"):
        uriel_distance("eng_Latn", "deu_Latn", "syntax")


def test_table() -> None:
    frame = uriel_distances(["eng_Latn", "deu_Latn", "zho_Hans", "cmn_Hans", "rus_Cyrl"])
    assert list(frame.columns) == ["lang_a", "lang_b", "uriel_a", "uriel_b", *KINDS, "source"]
    assert len(frame) == 6  # zho_Hans is cmn_Hans: 4 languages, 6 pairs
    assert frame["source"].str.startswith("URIEL via lang2vec").all()
    first = frame.iloc[0]
    assert (first["lang_a"], first["lang_b"]) == ("eng_Latn", "deu_Latn")
    for kind in KINDS:
        assert first[kind] == uriel_distance("eng_Latn", "deu_Latn", kind)
    with pytest.raises(TypologyError, match="at least two"):
        uriel_distances(["eng_Latn", "eng"])


def test_all_zero_vector_gives_nan_with_a_warning() -> None:
    assert uriel_coverage("eus")["genetic"][0] == 0  # Basque: no family node in URIEL
    from interlingua.analysis.typology.uriel import _pair_distance

    _pair_distance.cache_clear()
    with pytest.warns(TypologyWarning, match="eus"):
        value = uriel_distance("eng_Latn", "eus", "genetic")
    assert math.isnan(value)


def test_coverage() -> None:
    cov = uriel_coverage("eng_Latn")
    assert cov["syntactic"] == (103, 103)
    assert cov["featural"][1] == 289
    assert uriel_coverage("lvs_Latn", remap=False)["syntactic"][0] == 0


def _shimmed_lang2vec() -> types.ModuleType:
    """Import ``lang2vec.lang2vec``, lending it a minimal ``pkg_resources`` if setuptools has none."""
    try:
        import pkg_resources  # noqa: F401

        return importlib.import_module("lang2vec.lang2vec")
    except ImportError:
        pass
    shim = types.ModuleType("pkg_resources")

    def resource_filename(package: str, resource: str) -> str:
        return os.path.join(os.path.dirname(sys.modules[package].__file__), resource)

    shim.resource_filename = resource_filename  # type: ignore[attr-defined]
    sys.modules["pkg_resources"] = shim
    try:
        return importlib.import_module("lang2vec.lang2vec")
    finally:
        del sys.modules["pkg_resources"]


@pytest.mark.parametrize(
    ("kind", "feature_set"),
    [
        ("syntactic", "syntax_knn"),
        ("phonological", "phonology_knn"),
        ("inventory", "inventory_knn"),
        ("featural", "syntax_knn+phonology_knn+inventory_knn"),
        pytest.param("genetic", "fam", marks=pytest.mark.slow),  # lang2vec indexes 3,718 features one by one
        ("geographic", "geo"),
    ],
)
@pytest.mark.slow
def test_agrees_with_lang2vec_get_features(kind: str, feature_set: str) -> None:
    l2v = _shimmed_lang2vec()
    pairs = [("eng", "nld"), ("eng", "ell"), ("deu", "rus"), ("cmn", "jpn"), ("hin", "tam")]
    feats = l2v.get_features(sorted({code for pair in pairs for code in pair}), feature_set)  # one (slow) query
    for a, b in pairs:
        u, v = (np.asarray(feats[x], dtype=np.float64) for x in (a, b))
        expected = 1.0 - u @ v / (np.linalg.norm(u) * np.linalg.norm(v))
        assert uriel_distance(a, b, kind) == pytest.approx(expected, abs=1e-9)


def test_agrees_with_urielplus_on_shared_files() -> None:
    """urielplus ships the same fam/geo files; its cosine distance (4 decimals) must match."""
    urielplus = pytest.importorskip("urielplus.urielplus")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = urielplus.URIELPlus()
        except OSError as exc:  # it copies its data into its install folder on first use
            pytest.skip(f"urielplus cannot initialise here: {exc}")
    model.set_distance_metric("cosine")
    for kind in ("genetic", "geographic"):
        for a, b in [("eng", "nld"), ("eng", "ell")]:
            theirs = float(model.new_distance(kind, a, b))
            assert uriel_distance(a, b, kind) == pytest.approx(theirs, abs=1.5e-4), (kind, a, b)


def test_languages_and_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(uriel_languages()) == 7970 and "eng" in uriel_languages()
    from interlingua.analysis.typology import uriel

    def absent(name):
        raise uriel.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(uriel.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(uriel.importlib.metadata, "distribution", absent)
    uriel._data_dir.cache_clear()
    try:
        with pytest.raises(TypologyError, match=r"pip install 'interlingua\[typology\]'"):
            uriel._data_dir()
    finally:
        monkeypatch.undo()
        uriel._data_dir.cache_clear()


def test_a_lang2vec_script_first_on_the_path_does_not_hide_the_package(tmp_path, monkeypatch):
    """lang2vec installs bin/lang2vec.py; a console script's sys.path[0] is bin.

    The package's data must still be found.
    """
    import sys

    from interlingua.analysis.typology import uriel

    (tmp_path / "lang2vec.py").write_text("raise SystemExit('not the package')\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    uriel._data_dir.cache_clear()
    try:
        folder = uriel._data_dir()
    finally:
        uriel._data_dir.cache_clear()
    assert (folder / "feature_predictions.npz").is_file() and folder.parent.name == "lang2vec"
