"""Local corpora: TSV, CSV, JSONL and folders round-trip; misalignment names file, language, line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.data.corpora import load_corpus, load_local

# Invented sentences (not from any corpus); each encodes its row number.
ENG = [
    "The red kite flew over 0 hills.",
    'She said "hello" to 1 neighbour.',
    "Tabs\tand, commas for row 2.",
]
RUS = [
    "Красный змей пролетел над 0 холмами.",
    "Она сказала «привет» 1 соседу.",
    "Табуляция\tи, запятые в строке 2.",
]
HIN = [
    "लाल पतंग 0 पहाड़ियों के ऊपर उड़ी।",
    "उसने 1 पड़ोसी से नमस्ते कहा।",
    'पंक्ति 2 में अल्पविराम, और उद्धरण " हैं।',
]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


# ------------------------------------------------------------------ round trips
def test_csv_round_trip_with_tabs_quotes_commas_and_non_latin(tmp_path: Path) -> None:
    path = tmp_path / "toy.csv"
    write_csv(path, ["id", "eng_latn", "rus_Cyrl", "hin_Deva"], [[f"r{i}", ENG[i], RUS[i], HIN[i]] for i in range(3)])
    corpus = load_local(path)
    assert corpus.ids == ("r0", "r1", "r2")
    assert corpus.languages == ("eng_Latn", "rus_Cyrl", "hin_Deva")
    assert corpus.sentences("eng_Latn") == ENG
    assert corpus.sentences("rus_Cyrl") == RUS
    assert corpus.sentences("hin_Deva") == HIN


def test_csv_with_multiline_field_reports_correct_line_later(tmp_path: Path) -> None:
    path = tmp_path / "multi.csv"
    path.write_text('eng_Latn,deu_Latn\n"first line\nsecond line",erste Zeile\nok,\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"multi\.csv, line 4: the deu_Latn cell of id '1' is empty"):
        load_local(path)


def test_tsv_round_trip_without_id_column_uses_row_numbers(tmp_path: Path) -> None:
    path = tmp_path / "toy.tsv"
    lines = ["eng_Latn\trus_Cyrl\thin_Deva"]
    lines += [f"{e}\t{r}\t{h}" for e, r, h in zip(ENG[:2], RUS[:2], HIN[:2])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = load_local(path)
    assert corpus.ids == ("0", "1")
    assert corpus.sentences("eng_Latn") == ENG[:2]  # a quote inside an unquoted field is kept
    assert corpus.sentences("hin_Deva") == HIN[:2]


def test_tsv_written_by_pandas_round_trips_quotes_tabs_and_newlines(tmp_path: Path) -> None:
    import pandas as pd

    eng = ['He said "hi" twice.', "A tab\there.", '"Fully quoted."', "Two\nlines."]
    deu = ["Er sagte zweimal „hallo“.", "Ein Tab\thier.", "„Ganz zitiert.“", "Zwei\nZeilen."]
    path = tmp_path / "pandas.tsv"
    pd.DataFrame({"id": ["a", "b", "c", "d"], "eng_Latn": eng, "deu_Latn": deu}).to_csv(path, sep="\t", index=False)
    corpus = load_local(path)
    assert corpus.ids == ("a", "b", "c", "d")
    assert corpus.sentences("eng_Latn") == eng
    assert corpus.sentences("deu_Latn") == deu


def test_tsv_with_unbalanced_leading_quote_is_an_error_not_a_silent_repair(tmp_path: Path) -> None:
    path = tmp_path / "raw.tsv"
    path.write_text('eng_Latn\tdeu_Latn\nfine\tgut\n"Stop," he said.\tHalt.\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"raw\.tsv, line 3: malformed quoting.*inner quotes doubled"):
        load_local(path)


def test_tsv_crlf_and_bom_are_handled(tmp_path: Path) -> None:
    path = tmp_path / "win.tsv"
    path.write_bytes("\ufeffid\teng_Latn\tdeu_Latn\r\nx\tone apple\tein Apfel\r\n".encode("utf-8"))
    corpus = load_local(path)
    assert corpus.ids == ("x",)
    assert corpus.sentences("deu_Latn") == ["ein Apfel"]


def test_jsonl_round_trip_with_integer_ids(tmp_path: Path) -> None:
    path = tmp_path / "toy.jsonl"
    records = [{"id": 10 + i, "eng_Latn": ENG[i], "cmn_hans": f"第{i}句。"} for i in range(3)]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n\n", encoding="utf-8")
    corpus = load_local(path)
    assert corpus.ids == ("10", "11", "12")
    assert corpus.sentences("cmn_Hans") == ["第0句。", "第1句。", "第2句。"]
    assert corpus.sentences("eng_Latn") == ENG


def test_folder_of_text_files_round_trip(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.txt").write_text(
        "\n".join(["one cat", "two dogs", "three\u2028birds"]) + "\n", encoding="utf-8"
    )
    (tmp_path / "rus_cyrl.txt").write_text("одна кошка\nдве собаки\nтри птицы\n", encoding="utf-8")
    corpus = load_local(tmp_path)
    assert corpus.ids == ("0", "1", "2")
    assert corpus.languages == ("eng_Latn", "rus_Cyrl")
    # U+2028 is inside a sentence, not a line break: alignment must hold.
    assert corpus.sentences("eng_Latn")[2] == "three\u2028birds"
    assert corpus.sentences("rus_Cyrl")[2] == "три птицы"


def test_folder_with_ids_file(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.txt").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "deu_Latn.txt").write_text("A\nB\n", encoding="utf-8")
    (tmp_path / "ids.txt").write_text("first\nsecond\n", encoding="utf-8")
    assert load_local(tmp_path).ids == ("first", "second")


def test_language_selection_and_load_corpus_dispatch(tmp_path: Path) -> None:
    path = tmp_path / "toy.csv"
    write_csv(path, ["eng_Latn", "rus_Cyrl", "hin_Deva"], [[ENG[i], RUS[i], HIN[i]] for i in range(3)])
    corpus = load_corpus("local", ["hin_deva", "eng_latn"], path=str(path))
    assert corpus.languages == ("hin_Deva", "eng_Latn")
    assert corpus.sentences("hin_Deva") == HIN
    everything = load_corpus("local", [], path=path)
    assert everything.languages == ("eng_Latn", "rus_Cyrl", "hin_Deva")
    with pytest.raises(LanguageError, match="no deu_Latn column.*available: eng_Latn, rus_Cyrl, hin_Deva"):
        load_corpus("local", ["deu_Latn"], path=path)


def test_format_option_overrides_suffix(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("eng_Latn\tdeu_Latn\nyes\tja\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="single text file.*folder"):
        load_local(path)
    assert load_local(path, format="tsv").sentences("deu_Latn") == ["ja"]


# ---------------------------------------------------------------- misalignment
def test_tsv_missing_cell_names_file_language_and_line(tmp_path: Path) -> None:
    path = tmp_path / "gap.tsv"
    path.write_text("eng_Latn\tdeu_Latn\none\teins\ntwo\t \nthree\tdrei\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"gap\.tsv, line 3: the deu_Latn cell of id '1' is empty"):
        load_local(path)


def test_tsv_missing_field_names_line(tmp_path: Path) -> None:
    path = tmp_path / "short.tsv"
    path.write_text("eng_Latn\tdeu_Latn\none\teins\ntwo\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"short\.tsv, line 3: 1 fields but the header \(line 1\) has 2"):
        load_local(path)


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    write_csv(path, ["id", "eng_Latn"], [["a", "x"], ["b", "y"], ["a", "z"]])
    with pytest.raises(CorpusError, match=r"dup\.csv, line 4: duplicate id 'a' \(first seen on line 2\)"):
        load_local(path)


def test_jsonl_missing_key_names_language_and_line(tmp_path: Path) -> None:
    path = tmp_path / "gap.jsonl"
    path.write_text(
        '{"id": 1, "eng_Latn": "one", "deu_Latn": "eins"}\n{"id": 2, "eng_Latn": "two"}\n',
        encoding="utf-8",
    )
    with pytest.raises(CorpusError, match=r"gap\.jsonl, line 2: the deu_Latn cell of id '2' is missing"):
        load_local(path)


def test_jsonl_extra_key_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "extra.jsonl"
    path.write_text('{"eng_Latn": "one"}\n{"eng_Latn": "two", "fra_Latn": "deux"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"line 2: key\(s\) 'fra_Latn' do not appear on line 1"):
        load_local(path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"eng_Latn": "one"}\n{"eng_Latn": \n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl, line 2: not valid JSON"):
        load_local(bad)


def test_folder_different_line_counts(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.txt").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "deu_Latn.txt").write_text("A\nB\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"deu_Latn\.txt \(deu_Latn\) has 2 lines but eng_Latn\.txt has 3.*line: 3"):
        load_local(tmp_path)


def test_folder_empty_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.txt").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "deu_Latn.txt").write_text("A\n\nC\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"deu_Latn\.txt, line 2: the deu_Latn sentence is empty"):
        load_local(tmp_path)


def test_folder_with_non_language_file_and_duplicate_ids(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.txt").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("remember\n", encoding="utf-8")
    with pytest.raises(LanguageError, match=r"notes\.txt: the file name does not name a language"):
        load_local(tmp_path)
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "ids.txt").write_text("k\nk\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"ids\.txt, line 2: duplicate id 'k'"):
        load_local(tmp_path)


def test_bad_headers(tmp_path: Path) -> None:
    path = tmp_path / "head.csv"
    write_csv(path, ["id", "english", "deu_Latn"], [["1", "x", "y"]])
    with pytest.raises(LanguageError, match="header column 2 is 'english'"):
        load_local(path)
    write_csv(path, ["eng_Latn", "eng_latn"], [["x", "y"]])
    with pytest.raises(CorpusError, match="both eng_Latn"):
        load_local(path)
    write_csv(path, ["id"], [["1"]])
    with pytest.raises(CorpusError, match="names no language column"):
        load_local(path)


def test_missing_path_unknown_suffix_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        load_local(tmp_path / "nope.tsv")
    odd = tmp_path / "data.xlsx"
    odd.write_text("x", encoding="utf-8")
    with pytest.raises(CorpusError, match="cannot tell the format.*set format="):
        load_local(odd)
    with pytest.raises(CorpusError, match="unknown local corpus format 'xml'"):
        load_local(odd, format="xml")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match="empty"):
        load_local(empty)
    header_only = tmp_path / "header.tsv"
    header_only.write_text("eng_Latn\tdeu_Latn\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="has a header but no sentences"):
        load_local(header_only)


def test_load_corpus_local_needs_path() -> None:
    with pytest.raises(CorpusError, match="needs path"):
        load_corpus("local", ["eng_Latn"])
