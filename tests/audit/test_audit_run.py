"""The run config's `audit:` section, foreign tokenizers (`tokenizer:`), sweeps and contrasts, on the tiny zoo.

The seed situation in miniature: "uploaded" models that are the English model
with an identity adapter read through the bilingual tokenizer, labelled as
points of an alpha sweep. The audit must call the adapters identities and the
tokenizer mismatched, group the models as one, and the sweep's results must be
flagged as a measurement of a constant.
"""

from __future__ import annotations

import pandas as pd
import pytest

from interlingua.core.errors import AuditError, ModelError
from interlingua.pipeline.runs import run
from interlingua.predictors.sweeps import CONSTANT

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

BI = "zoo:tiny:eng-deu/tokenizer"


def _spec(tiny_zoo, tmp_path, models, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tiny_zoo.root),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 24},
        "models": models,
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0, "score": "raw"},  # no null: the sweeps and contrasts read matched
        "pairs": {"within_model": True, "cross_model": "none"},
        "audit": {"language": "eng_Latn"},
    }
    spec.update(over)
    return spec


def _uploaded(alphas, adapter="eng+deu-lora-identity", sweep="uploaded"):
    return [
        {
            "name": f"{sweep}-{int(a * 100)}",
            "zoo": f"tiny:{adapter}",
            "tokenizer": BI,
            "sweep": sweep,
            "sweep_values": {"alpha": a},
        }
        for a in alphas
    ]


@pytest.fixture(scope="module")
def audited(tiny_zoo, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit_run")
    models = [
        {"name": "base", "zoo": "tiny:eng"},
        *_uploaded([0.25, 0.5, 0.75]),
        *_uploaded([0.25, 0.5, 0.75], adapter="eng+deu-lora", sweep="trained"),
    ]
    res = run(_spec(tiny_zoo, tmp, models, contrasts=[{"a": "trained", "b": "uploaded"}]))
    return res


def test_audit_section_writes_verdicts_groups_and_confounds(audited):
    audit = pd.read_csv(audited.output / "audit.csv", keep_default_na=False)
    rows = audit.set_index("model")
    assert list(audit["model"])[:4] == ["base", "uploaded-25", "uploaded-50", "uploaded-75"]
    assert (rows.loc[["uploaded-25", "uploaded-50", "uploaded-75"], "adapter_verdict"] == "identity").all()
    assert (rows.loc[["trained-25", "trained-50"], "adapter_verdict"] == "active").all()
    # the bilingual tokenizer's ids do not index the English embedding's rows
    assert (rows.loc[["uploaded-25", "trained-25"], "tokenizer_verdict"] == "mismatched tokenizer").all()
    assert rows.loc["base", "tokenizer_verdict"] == "ok"
    # identity adapter = its base: one weights group; the foreign tokenizer: another tokenizer group
    assert rows.loc["uploaded-25", "weights_group"] == rows.loc["base", "weights_group"]
    assert rows.loc["uploaded-25", "tokenizer_group"] != rows.loc["base", "tokenizer_group"]
    assert "differs from base only by tokenizer" in rows.loc["uploaded-25", "confounds"]
    assert "same model as uploaded-50" in rows.loc["uploaded-25", "confounds"]
    assert rows.loc["trained-25", "weights_group"] != rows.loc["base", "weights_group"]
    # NLL on the English side: the model reads its own tokenizer's ids better than the foreign ones
    assert rows.loc["uploaded-25", "nll"] > rows.loc["base", "nll"]
    assert (audit["quality_language"] == "eng_Latn").all()
    assert rows.loc["uploaded-25", "verdict"].startswith("adapter identity; mismatched tokenizer")
    # the base's own checks pass, and its sameness with the uploaded models is their identity adapters' fault:
    # listed among its confounds, not counted in its verdict
    assert "differs from uploaded-25 only by tokenizer" in rows.loc["base", "confounds"]
    assert rows.loc["base", "verdict"] == "ok" and not rows.loc["base", "bad"]
    # the three "trained" points name the same checkpoint: their sameness is what the config asked for (the
    # sweep reports it as a measurement of a constant), so their verdicts hold only their own findings
    assert "same model as trained-50" in rows.loc["trained-25", "confounds"]
    assert "same model as" not in rows.loc["trained-25", "verdict"]
    report = (audited.output / "report.md").read_text()
    assert "## Audit" in report and "mismatched tokenizer" in report


def test_sweep_of_identical_models_is_a_measurement_of_a_constant(audited):
    sweeps = pd.read_csv(audited.output / "sweeps.csv", keep_default_na=False)
    up = sweeps[sweeps["sweep"] == "uploaded"]
    assert len(up) == 1
    row = up.iloc[0]
    assert row["n_models"] == 3 and row["n_distinct"] == 1 and row["verdict"] == CONSTANT
    assert "the same model" in row["explanation"]
    trained = sweeps[sweeps["sweep"] == "trained"].iloc[0]
    # trained adapters at every "alpha" are the same adapter too: also constant, explained by its weights group
    assert trained["verdict"] == CONSTANT
    table = audited.table
    last = table[(table["model_a"].str.startswith("uploaded")) & (table["depth_a"] == 1.0)]
    assert last["matched"].nunique() == 1
    assert "a measurement of a constant" in (audited.output / "report.md").read_text()


def test_contrast_pairs_cells_by_sweep_values(audited):
    c = pd.read_csv(audited.output / "contrasts.csv", keep_default_na=False)
    assert len(c) == 1
    row = c.iloc[0]
    assert row["a"] == "trained" and row["b"] == "uploaded" and row["n"] == 3
    t = audited.table
    last = t[(t["depth_a"] == 1.0) & (t["kind"] == "within_model")].set_index("model_a")["matched"]
    diffs = [last[f"trained-{a}"] - last[f"uploaded-{a}"] for a in (25, 50, 75)]
    assert row["mean_diff"] == pytest.approx(sum(diffs) / 3, rel=1e-12, abs=1e-15)


def test_cached_rerun_recomputes_no_audit(tiny_zoo, audited):
    import json

    info = json.loads((audited.output / "run.json").read_text())
    spec = info["spec"]
    spec["overwrite"] = True
    again = run(spec)
    assert "audit" not in again.info["computed"]
    pd.testing.assert_frame_equal(pd.read_csv(again.output / "audit.csv"), pd.read_csv(audited.output / "audit.csv"))


def test_strict_audit_stops_before_extraction(tiny_zoo, tmp_path):
    spec = _spec(tiny_zoo, tmp_path, [{"name": "base", "zoo": "tiny:eng"}, *_uploaded([0.5])])
    spec["audit"]["strict"] = True
    with pytest.raises(AuditError, match="uploaded-50: adapter identity; mismatched tokenizer"):
        run(spec)
    assert not (tmp_path / "out").exists()


def test_strict_audit_cli_exits_2(tiny_zoo, tmp_path):
    import yaml

    from interlingua.cli import main

    spec = _spec(tiny_zoo, tmp_path, [{"name": "base", "zoo": "tiny:eng"}, *_uploaded([0.5])])
    spec["audit"]["strict"] = True
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["run", str(path)]) == 2


def test_tokenizer_larger_than_the_embedding_is_refused(tiny_zoo, tmp_path):
    from transformers import AutoTokenizer

    from interlingua.data.models import ModelSpec, load_model
    from interlingua.zoo import resolve_zoo

    tok = AutoTokenizer.from_pretrained(str(resolve_zoo("tiny:eng-deu/tokenizer", tiny_zoo.root)))
    tok.add_tokens([f"extra{i}" for i in range(5)])
    folder = tmp_path / "bigger"
    tok.save_pretrained(folder)
    spec = ModelSpec(path=str(resolve_zoo("tiny:eng", tiny_zoo.root)), tokenizer=str(folder))
    with pytest.raises(ModelError, match="ids but the model's embedding has"):
        load_model(spec)


def test_tokenizer_override_changes_the_fingerprint(tiny_zoo):
    from interlingua.data.models import ModelSpec
    from interlingua.data.models.fingerprint import spec_fingerprint
    from interlingua.zoo import resolve_zoo

    eng = str(resolve_zoo("tiny:eng", tiny_zoo.root))
    bilingual = str(resolve_zoo("tiny:eng-deu/tokenizer", tiny_zoo.root))
    own = spec_fingerprint(ModelSpec(path=eng))
    other = spec_fingerprint(ModelSpec(path=eng, tokenizer=bilingual))
    assert own != other  # cached representations of one never serve the other
    assert other == spec_fingerprint(ModelSpec(path=eng, tokenizer=bilingual, name="renamed"))


def test_contrast_arm_must_exist():
    from interlingua.core.errors import ConfigError
    from interlingua.pipeline.config import parse_spec

    with pytest.raises(ConfigError, match="neither a model nor a sweep"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"zoo": "eng"}],
                "contrasts": [{"a": "eng", "b": "nope"}],
            }
        )


def test_audit_cli_reads_specs_with_a_foreign_tokenizer_and_audits_a_config(tiny_zoo, tmp_path, capsys):
    import yaml

    from interlingua.cli import main

    out = tmp_path / "a"
    rc = main(
        ["audit", "zoo:tiny:eng", "--tokenizer", BI, "--cache-dir", str(tiny_zoo.root), "-o", str(out), "--strict"]
    )
    assert rc == 1  # --strict and a bad row
    row = pd.read_csv(out / "audit.csv", keep_default_na=False).iloc[0]
    assert row["tokenizer_verdict"] == "mismatched tokenizer"
    spec = _spec(tiny_zoo, tmp_path, [{"name": "base", "zoo": "tiny:eng"}, *_uploaded([0.5])])
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["audit", "--config", str(path), "-o", str(tmp_path / "b")]) == 0
    frame = pd.read_csv(tmp_path / "b" / "audit.csv", keep_default_na=False)
    assert list(frame["model"]) == ["base", "uploaded-50"]
    assert frame["nll"].notna().all() and (frame["n_sentences"] == 24).all()  # the config's English side
    assert main(["audit", "-o", str(tmp_path / "c")]) == 2


def test_many_adapters_over_one_base_load_it_once_and_leave_it_unchanged(tiny_zoo, monkeypatch):
    from interlingua.audit import CausalLMCache, mean_nll
    from interlingua.audit import quality as quality_module
    from interlingua.data.models import ModelSpec
    from interlingua.zoo import resolve_zoo, zoo_model_fields

    loads = []
    real = quality_module.load_causal_lm
    monkeypatch.setattr(quality_module, "load_causal_lm", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    eng = str(resolve_zoo("tiny:eng", tiny_zoo.root))
    lora = zoo_model_fields("tiny:eng+deu-lora", tiny_zoo.root)["adapter"]
    identity = zoo_model_fields("tiny:eng+deu-lora-identity", tiny_zoo.root)["adapter"]
    sentences = ["In the beginning was the Word.", "And the Word was with God.", "He came unto his own."]
    cache = CausalLMCache()
    specs = [
        ModelSpec(path=eng),
        ModelSpec(path=eng, adapter=lora),
        ModelSpec(path=eng, adapter=identity),
        ModelSpec(path=eng, adapter=lora),
        ModelSpec(path=eng),
    ]
    nlls = [cache.quality(s, sentences).nll for s in specs]
    assert len(loads) == 1 and cache.loads == 1
    assert nlls[0] == nlls[2] == nlls[4]  # identity adapter = base; the base is unchanged after adapters
    assert nlls[1] == nlls[3] and nlls[1] != nlls[0]
    fresh, tok = real(ModelSpec(path=eng, adapter=lora))
    assert mean_nll(fresh, tok, sentences)[0] == nlls[1]  # the same numbers as a fresh load with the adapter
