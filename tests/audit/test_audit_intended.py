"""Audit verdicts count faults, not the differences the config asked for (issue: "9 models audited; 9 bad").

The identity groups are facts about files; whether a confound is a FAULT depends on what the config named:
the same checkpoint listed twice is meant to be the same model, the same checkpoint read with a ``tokenizer:``
is meant to differ only by tokenizer, and the base an identity adapter collapses onto is honest (the fault
is the adapter's, which asked for a change that is not there).
"""

from __future__ import annotations

import shutil

from interlingua.audit import audit_adapter
from interlingua.audit.core import finish_rows
from interlingua.audit.identity import identity_groups, spec_identity
from interlingua.data.models import ModelSpec

PAIR = "eng_Latn-deu_Latn"


def _ident(spec):
    verdict = audit_adapter(spec.adapter, spec).verdict if spec.adapter else None
    return spec_identity(spec, adapter_verdict=verdict)


def _table(specs):
    idents = [_ident(s) for s in specs]
    rows = [{"model": s.label, "_bad": [], "note": ""} for s in specs]
    return finish_rows(rows, idents).set_index("model"), {i.label: i for i in identity_groups(idents)}


def test_intended_sameness_is_listed_but_not_a_fault(tiny_zoo, tmp_path):
    base = tiny_zoo.folder / "eng_Latn" / "final"
    bitok = tiny_zoo.folder / PAIR / "tokenizer"
    copy = tmp_path / "eng_copy"  # another folder holding the same bytes: the config names another model
    shutil.copytree(base, copy)
    specs = [
        ModelSpec(name="eng", path=str(base)),
        ModelSpec(name="eng-again", path=str(base)),  # one checkpoint listed twice (e.g. two sweep points)
        ModelSpec(name="eng-bitok", path=str(base), tokenizer=str(bitok)),  # deliberately another tokenizer
        ModelSpec(name="eng+id", path=str(base), adapter=str(tiny_zoo.folder / PAIR / "lora-identity")),
        ModelSpec(name="eng+lora", path=str(base), adapter=str(tiny_zoo.folder / PAIR / "lora")),
        ModelSpec(name="copy", path=str(copy)),
    ]
    table, ids = _table(specs)
    # the facts are unchanged: every confound is still listed
    assert ids["eng"].confounds == [
        "same model as eng-again",
        "differs from eng-bitok only by tokenizer",
        "same model as eng+id",
        "same model as copy",
    ]
    # the base is honest towards what the config named the same (eng-again, eng-bitok) and towards the identity
    # adapter (its fault); the copy in another folder is an unintended duplicate (the config named two models)
    assert ids["eng"].faults == ["same model as copy"]
    assert ids["eng"].intended == [
        "same model as eng-again",
        "differs from eng-bitok only by tokenizer",
        "same model as eng+id",
    ]
    assert table.loc["eng", "verdict"] == "same model as copy" and table.loc["eng", "bad"]
    assert "as the config asks" in table.loc["eng", "note"] and "eng-bitok" in table.loc["eng", "note"]
    # the identity adapter asked for a change that is not there: every sameness it has is its fault
    assert ids["eng+id"].faults == [
        "same model as eng",
        "same model as eng-again",
        "differs from eng-bitok only by tokenizer",
        "same model as copy",
    ]
    # read with another tokenizer on purpose: differing from eng only by tokenizer is what the config asked for
    assert table.loc["eng-bitok", "verdict"] == "differs from copy only by tokenizer"
    assert table.loc["eng+lora", "verdict"] == "ok" and not table.loc["eng+lora", "bad"]


def test_without_duplicates_or_no_op_adapters_every_verdict_is_ok(tiny_zoo):
    base = tiny_zoo.folder / "eng_Latn" / "final"
    specs = [
        ModelSpec(name="eng", path=str(base)),
        ModelSpec(name="eng-bitok", path=str(base), tokenizer=str(tiny_zoo.folder / PAIR / "tokenizer")),
        ModelSpec(name="deu", path=str(tiny_zoo.folder / "deu_Latn" / "final")),
    ]
    table, _ = _table(specs)
    assert (table["verdict"] == "ok").all() and not table["bad"].any()
    assert table.loc["eng", "confounds"] == "differs from eng-bitok only by tokenizer"  # still stated
