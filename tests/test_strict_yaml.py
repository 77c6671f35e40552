"""Strict configs: a repeated YAML key is an error naming the key and both places; an empty list where a field
selects something (books, languages, models, measures, poolings, ...) is an error, never "everything"; what a
run selected from its corpus is recorded in run.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fixtures.runs import spec_for
from interlingua.cli import main
from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import empty_selections, load_spec, parse_spec

BIBLE = {
    "output": "out",
    "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "n": 8, "books": ["PRO"]},
    "models": [{"name": "a", "path": "some/folder"}],
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_repeated_top_level_key_names_the_key_and_both_lines(tmp_path) -> None:
    cfg = _write(
        tmp_path,
        "output: out\n"
        "pooling: [mean]\n"
        "corpus: {source: bible, languages: [eng_Latn, deu_Latn]}\n"
        "models:\n"
        "  - path: some/folder\n"
        "pooling: [sgpt]\n",
    )
    with pytest.raises(ConfigError) as err:
        load_spec(cfg)
    msg = str(err.value)
    assert "'pooling' twice" in msg and "line 2, column 1" in msg and "line 6, column 1" in msg
    # the same document without the repetition is valid: the error is about the repeated key alone
    assert load_spec(_write(tmp_path, cfg.read_text().replace("pooling: [mean]\n", ""))).pooling == ["sgpt"]


def test_a_repeated_key_in_a_flow_mapping_names_both_columns(tmp_path, capsys) -> None:
    cfg = _write(
        tmp_path,
        "output: out\ncorpus: {source: bible, languages: [eng_Latn, deu_Latn], n: 20, n: 8}\nmodels: [{path: m}]\n",
    )
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interlingua: error: ")
    assert "'n' twice: line 2, column" in err[0] and err[0].count("line 2, column") == 2


def test_repeated_keys_are_found_in_nested_block_mappings(tmp_path) -> None:
    cfg = _write(
        tmp_path,
        "output: out\ncorpus:\n  source: bible\n  languages: [eng_Latn, deu_Latn]\nmodels:\n"
        "  - path: m\n    name: a\n    name: b\n",
    )
    with pytest.raises(ConfigError, match=r"'name' twice: line 7, column 5 and line 8, column 5"):
        load_spec(cfg)


def test_merge_keys_still_merge_and_may_be_overridden(tmp_path) -> None:
    cfg = _write(
        tmp_path,
        "output: out\n"
        "corpus: {source: bible, languages: [eng_Latn, deu_Latn]}\n"
        "models:\n"
        "  - &one {name: a, path: m, dtype: float32}\n"
        "  - {<<: *one, name: b}\n",
    )
    spec = load_spec(cfg)
    assert [m.name for m in spec.models] == ["a", "b"] and spec.models[1].path == "m"


def test_code_tags_stay_refused(tmp_path) -> None:
    flag = tmp_path / "ran"
    cfg = _write(tmp_path, f'output: !!python/object/apply:os.system ["touch {flag}"]\n')
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(cfg)
    assert not flag.exists()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("corpus", "books"), []),
        (("corpus", "versions"), {}),
        (("corpus", "languages"), []),
        (("models",), []),
        (("measures",), []),
        (("pooling",), []),
        (("quality",), {"languages": []}),
        (("maps",), {"estimators": []}),
        (("maps",), {"pairs": []}),
        (("alignment",), {"pairs": []}),
        (("patching",), {"countries": []}),
        (("patching",), {"layers": []}),
    ],
)
def test_an_empty_selection_is_an_error_not_everything(path: tuple[str, ...], value: object) -> None:
    data = json.loads(json.dumps(BIBLE))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    where = ".".join(path) if value in ([], {}) else f"{path[0]}.{next(iter(value))}"  # type: ignore[arg-type]
    # fields with a minimum length keep the schema's message ("give more entries"); the others get ours
    assert empty_selections(data) in ([where], [])
    with pytest.raises(ConfigError, match=rf"^{where.replace('.', '[.]')}: (an empty list selects nothing|.*more)"):
        parse_spec(data)


def test_empty_lists_whose_default_is_empty_stay_accepted() -> None:
    data = {**BIBLE, "pairs": {"explicit": []}, "contrasts": [], "model_sets": []}
    assert empty_selections(data) == []
    assert parse_spec(data).pairs.explicit == []


def test_an_empty_selection_in_a_list_of_models_names_its_position() -> None:
    data = {
        **BIBLE,
        "models": [{"name": "a", "path": "m"}, {"name": "m", "path": "m", "tokenwise_merge": {"alpha": []}}],
    }
    assert empty_selections(data) == ["models.2.tokenwise_merge.alpha"]


def test_the_selection_resolves_books_to_codes() -> None:
    spec = parse_spec({**BIBLE, "corpus": {**BIBLE["corpus"], "books": ["JHN", 20, "nt"]}})
    sel = spec.corpus.selection()
    assert sel["books"][0] == "PRO" and sel["books"][1] == "MAT" and "JHN" in sel["books"] and len(sel["books"]) == 28
    assert parse_spec({**BIBLE, "corpus": {**BIBLE["corpus"], "books": None}}).corpus.selection()["books"] == "all"


@pytest.mark.pipeline
def test_run_json_records_what_was_selected(tmp_path, tiny_gpt2_path) -> None:
    spec = spec_for(tmp_path, tmp_path, tiny_gpt2_path)
    spec["corpus"] = {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "n": 8, "books": ["PRO"]}
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    assert main(["run", str(cfg)]) == 0
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert info["corpus"]["selection"]["books"] == ["PRO"] and info["corpus"]["selection"]["n"] == 8
    assert "books=PRO" in info["corpus"]["name"]


def test_not_utf8_config_is_one_clear_error(tmp_path, capsys) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_bytes(b"output: out\ncorpus: \xff\n")
    for command in ("validate", "plan", "run"):
        assert main([command, str(cfg)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not UTF-8" in err[0] and "0xff on line 2" in err[0]
