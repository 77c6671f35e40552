"""audit(specs) rows and the `audit` command: verdicts, confounds, outputs, exit codes."""

from __future__ import annotations

import argparse
import shutil

import pandas as pd
import pytest

from interlingua.audit.columns import AUDIT_COLUMNS
from interlingua.audit.core import audit
from interlingua.commands.audit import add_audit_parser, parse_spec, run_audit
from interlingua.core.errors import InterlinguaError
from interlingua.core.schema import column_names
from interlingua.data.models import ModelSpec

PAIR = "eng_Latn-deu_Latn"


def _run(argv):
    parser = argparse.ArgumentParser(prog="interlingua")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    return run_audit(parser.parse_args(["audit", *argv]))


def _sentences(zoo, n=16):
    return list(next(t for f, t in zoo.recorded["tokenizer_texts"] if f == "eng_Latn")[:n])


def test_audit_rows(tiny_zoo, tmp_path):
    # the English model with the bilingual tokenizer dropped in: same weights, other tokenizer
    retok = tmp_path / "eng_bitok"
    shutil.copytree(tiny_zoo.folder / "eng_Latn" / "final", retok)
    for f in (tiny_zoo.folder / PAIR / "tokenizer").iterdir():
        shutil.copy(f, retok / f.name)
    specs = [
        ModelSpec(zoo="tiny:eng"),
        ModelSpec(zoo="tiny:eng+deu-lora"),
        ModelSpec(zoo="tiny:eng+deu-lora-identity"),
        ModelSpec(zoo="tiny:eng@step0"),
        ModelSpec(name="bitok", path=str(retok)),
    ]
    ref = {"bitok": tiny_zoo.folder / "eng_Latn" / "final"}
    df = audit(specs, cache_dir=tiny_zoo.root, corpus_sentences=_sentences(tiny_zoo), reference=ref)
    assert list(df.columns) == column_names(AUDIT_COLUMNS)
    r = df.set_index("model")
    assert r.loc["tiny/eng+deu-lora-identity", "adapter_verdict"] == "identity"
    assert r.loc["tiny/eng+deu-lora", "adapter_verdict"] == "active"
    assert r.loc["tiny/eng+deu-lora", "adapter_base_check"] == "matched"
    assert not r.loc["tiny/eng+deu-lora", "bad"] and r.loc["tiny/eng+deu-lora", "verdict"] == "ok"
    assert r.loc["tiny/eng@step0", "quality_verdict"] == "not a language model"
    assert r.loc["tiny/eng", "quality_verdict"] == "ok"
    assert r.loc["bitok", "tokenizer_verdict"] == "mismatched tokenizer"
    assert (
        r.loc["tiny/eng", "weights_group"]
        == r.loc["tiny/eng+deu-lora-identity", "weights_group"]
        == r.loc["bitok", "weights_group"]
    )
    assert "same model as tiny/eng+deu-lora-identity" in r.loc["tiny/eng", "confounds"]
    assert "differs from tiny/eng only by tokenizer" in r.loc["bitok", "confounds"]
    assert r.loc["tiny/eng", "nll"] == r.loc["tiny/eng+deu-lora-identity", "nll"]  # identity adapter: same numbers
    assert set(df.loc[df["bad"], "model"]) == {"tiny/eng", "tiny/eng+deu-lora-identity", "tiny/eng@step0", "bitok"}


def test_bad_specs_raise_before_work(tiny_zoo):
    with pytest.raises(InterlinguaError):
        audit([ModelSpec(zoo="tiny:nope")], cache_dir=tiny_zoo.root)
    with pytest.raises(InterlinguaError):
        parse_spec("/no/such/folder")
    assert parse_spec("package:gemma3-270m").package == "gemma3-270m"
    assert parse_spec("zoo:eng@step4").zoo == "eng@step4"


def test_cli_outputs_and_exit_codes(tiny_zoo, tmp_path, capsys):
    sentences = tmp_path / "s.txt"
    sentences.write_text("\n".join(_sentences(tiny_zoo, 8)) + "\n\n", encoding="utf-8")
    out = tmp_path / "out"
    base = ["zoo:tiny:eng+deu-lora", "--cache-dir", str(tiny_zoo.root), "-o", str(out)]
    assert _run(base + ["--sentences", str(sentences), "--strict"]) == 0
    csv, parquet = pd.read_csv(out / "audit.csv", keep_default_na=False), pd.read_parquet(out / "audit.parquet")
    assert list(parquet.columns) == column_names(AUDIT_COLUMNS) and len(csv) == 1
    assert parquet.loc[0, "adapter_verdict"] == "active" and parquet.loc[0, "n_sentences"] == 8
    printed = capsys.readouterr().out
    assert "tiny/eng+deu-lora" in printed and "audit.parquet" in printed

    ident = ["zoo:tiny:eng+deu-lora-identity", "--cache-dir", str(tiny_zoo.root), "-o", str(out)]
    assert _run(ident) == 0
    assert _run(ident + ["--strict"]) == 1
    assert pd.read_parquet(out / "audit.parquet").loc[0, "verdict"] == "adapter identity"

    capsys.readouterr()
    assert _run(["zoo:tiny:nope", "--cache-dir", str(tiny_zoo.root), "-o", str(out)]) == 2
    assert "interlingua: error:" in capsys.readouterr().err
    assert _run([str(tmp_path / "missing")]) == 2
    assert _run(base + ["--sentences", str(tmp_path / "none.txt")]) == 2


def test_cli_bible_sentences(tiny_zoo, tmp_path):
    out = tmp_path / "bible"
    assert _run(["zoo:tiny:eng", "--cache-dir", str(tiny_zoo.root), "--bible", "eng", "--n", "5", "-o", str(out)]) == 0
    row = pd.read_parquet(out / "audit.parquet").iloc[0]
    assert row["n_sentences"] == 5 and row["quality_verdict"] == "ok"
    with pytest.raises(SystemExit) as refused:  # --n is range-checked where it is parsed
        _run(["zoo:tiny:eng", "--cache-dir", str(tiny_zoo.root), "--bible", "eng", "--n", "0", "-o", str(out)])
    assert refused.value.code == 2
