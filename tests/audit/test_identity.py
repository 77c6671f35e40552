"""Identity groups on the zoo: an identity adapter is its base, a trained one is not; tokenizer-only differences."""

from __future__ import annotations

import shutil

from interlingua.audit import audit_adapter
from interlingua.audit.identity import NO_OP_ADAPTER, identity_groups, spec_identity
from interlingua.data.models import ModelSpec

PAIR = "eng_Latn-deu_Latn"


def _ident(spec):
    verdict = audit_adapter(spec.adapter, spec).verdict if spec.adapter else None
    return spec_identity(spec, adapter_verdict=verdict)


def test_groups_and_confounds(tiny_zoo, tmp_path):
    base = tiny_zoo.folder / "eng_Latn" / "final"
    # a copy of the English model shipped with the bilingual tokenizer: same weights, other tokenizer
    retok = tmp_path / "eng_bilingual_tok"
    shutil.copytree(base, retok)
    for f in (tiny_zoo.folder / PAIR / "tokenizer").iterdir():
        shutil.copy(f, retok / f.name)
    specs = [
        ModelSpec(name="eng", path=str(base)),
        ModelSpec(name="eng+id", path=str(base), adapter=str(tiny_zoo.folder / PAIR / "lora-identity")),
        ModelSpec(name="eng+lora", path=str(base), adapter=str(tiny_zoo.folder / PAIR / "lora")),
        ModelSpec(name="eng/bitok", path=str(retok)),
        ModelSpec(name="deu", path=str(tiny_zoo.folder / "deu_Latn" / "final")),
        ModelSpec(name="eng16", path=str(base), dtype="bfloat16"),
    ]
    ids = identity_groups([_ident(s) for s in specs])
    by = {i.label: i for i in ids}
    assert by["eng+id"].adapter_state == NO_OP_ADAPTER
    assert by["eng"].effective_key == by["eng+id"].effective_key  # identity adapter == its base
    assert by["eng"].weights_group == by["eng+id"].weights_group == by["eng/bitok"].weights_group == "W1"
    assert (
        by["eng+lora"].weights_group == "W2" and by["deu"].weights_group == "W3" and by["eng16"].weights_group == "W4"
    )
    assert by["eng"].tokenizer_group == by["eng+lora"].tokenizer_group == by["eng16"].tokenizer_group
    assert by["eng/bitok"].tokenizer_group != by["eng"].tokenizer_group
    assert by["eng"].confounds == ["same model as eng+id", "differs from eng/bitok only by tokenizer"]
    assert by["eng/bitok"].confounds == ["differs from eng only by tokenizer", "differs from eng+id only by tokenizer"]
    assert by["eng+lora"].confounds == [] and by["deu"].confounds == []


def test_an_unaudited_adapter_is_never_taken_for_its_base(tiny_zoo):
    base = tiny_zoo.folder / "eng_Latn" / "final"
    spec = ModelSpec(path=str(base), adapter=str(tiny_zoo.folder / PAIR / "lora-identity"))
    plain = spec_identity(ModelSpec(path=str(base)))
    assert spec_identity(spec).effective_key != plain.effective_key  # no verdict given: hashed, not assumed
    assert spec_identity(spec, adapter_verdict="identity").effective_key == plain.effective_key
