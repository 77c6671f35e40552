"""Zoo names, and the ``zoo`` command as the lead wires it into the CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from interlingua.commands.zoo import add_zoo_parser, run_zoo
from interlingua.zoo import ZooError, parse_zoo_name


@pytest.mark.parametrize(
    "name, kind, languages, extra",
    [
        ("eng", "model", ("eng_Latn",), "final"),
        ("eng@step64", "model", ("eng_Latn",), "step64"),
        ("eng_Latn@64", "model", ("eng_Latn",), "step64"),
        ("eng_latn/step16", "model", ("eng_Latn",), "step16"),
        ("deu@final", "model", ("deu_Latn",), "final"),
        ("eng/tokenizer", "tokenizer", ("eng_Latn",), None),
        ("eng-deu/tokenizer", "bilingual-tokenizer", ("eng_Latn", "deu_Latn"), None),
        ("eng+deu-lora", "adapter", ("eng_Latn", "deu_Latn"), "lora"),
        ("eng+rus-lora-identity", "adapter", ("eng_Latn", "rus_Cyrl"), "lora-identity"),
        ("eng-spa/lora-identity", "adapter", ("eng_Latn", "spa_Latn"), "lora-identity"),
    ],
)
def test_names_parse(name: str, kind: str, languages: tuple, extra: str | None) -> None:
    parsed = parse_zoo_name(name)
    assert (parsed.kind, parsed.languages, parsed.family) == (kind, languages, None)
    assert (parsed.checkpoint if kind == "model" else parsed.adapter) == extra


def test_family_prefix_and_zoo_scheme() -> None:
    parsed = parse_zoo_name("zoo:tiny:eng@step4")
    assert parsed.family == "tiny" and parsed.checkpoint == "step4"
    assert str(parsed) == "tiny:eng_Latn@step4"


@pytest.mark.parametrize("name", ["", "eng@step", "eng+eng-lora", "eng+deu-merged", "eng deu", "eng-deu", "zz_Qqqq"])
def test_bad_names_explain_the_grammar(name: str) -> None:
    with pytest.raises(ZooError):
        parse_zoo_name(name)


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="interlingua")
    add_zoo_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    assert args.command == "zoo"
    return run_zoo(args)


def test_cli_path_spec_list_and_noop_build(tiny_zoo, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tiny_zoo.root)
    assert _run(["zoo", "path", "eng@step4", "--cache-dir", root]) == 0
    assert capsys.readouterr().out.strip() == str(tiny_zoo.folder / "eng_Latn" / "step4")
    assert _run(["zoo", "path", "--spec", "eng+deu-lora", "--cache-dir", root]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec == {
        "name": "eng_Latn+deu_Latn-lora",
        "path": str(tiny_zoo.folder / "eng_Latn" / "final"),
        "adapter": str(tiny_zoo.folder / "eng_Latn-deu_Latn" / "lora"),
    }
    assert _run(["zoo", "list", "--cache-dir", root]) == 0
    out = capsys.readouterr().out
    assert "tiny:" in out and "eng_Latn" in out and "ln V" in out
    assert _run(["zoo", "build", "--preset", "tiny", "--cache-dir", root, "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(tiny_zoo.folder)


def test_cli_errors_are_one_line(tiny_zoo, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["zoo", "path", "fra@step4", "--cache-dir", str(tiny_zoo.root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("interlingua: error:") and "fra_Latn" in err and "eng_Latn" in err
    assert _run(["zoo", "path", "--spec", "eng/tokenizer", "--cache-dir", str(tiny_zoo.root)]) == 2
    assert "tokenizer, not a model" in capsys.readouterr().err
    assert _run(["zoo", "build", "--preset", "huge", "--cache-dir", str(tiny_zoo.root)]) == 2
