"""No traceback for any input: every command (``interlingua --help`` lists them) fed broken files, odd names and
out-of-range numbers either succeeds (exit 0) or says what is wrong in exactly one ``interlingua: error:`` line
(exit 2); nothing escapes ``main`` as an exception (which the console script would print as a traceback, exit 1).

The commands run in-process through :func:`interlingua.cli.main`. Nothing here loads real weights or trains:
configs are checked with ``validate`` / ``plan --offline`` / ``run --dry-run`` or fail before their heavy phase;
the whole runs with odd model names use the tiny GPT-2 and are marked ``slow``.
"""

from __future__ import annotations

import contextlib
import io
import string
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fixtures.runs import spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.cli import _parser, main

# runs the CLI / the executors: in the full suite, not make test-fast (its 2-minute promise)
pytestmark = pytest.mark.pipeline

PUNCTUATION = list(string.punctuation)  # every ASCII punctuation character
ODD = [
    *PUNCTUATION,
    " ",
    "a b",
    " lead",
    "trail ",
    "tab\there",
    "new\nline",
    "ft$50%",
    "$\\frac{1}{2}$",
    "<b>bold</b>",
    "<script>alert(1)</script>",
    "[link](http://x)",
    "`code`",
    "**x**",
    "名前",
    "Ünïcødé",
    "emoji🙂",
    "\u202eevil",
    "..",
    "../../etc",
    "-rf",
    "--flag",
    "%s%n",
    "{name}",
    "a" * 300,
]
#: The names ``make test-fast`` feeds (path separators, shell and markup characters, a newline, right-to-left, a
#: relative path, a flag, non-Latin script, 300 characters); the full suite feeds every name of ``ODD``.
FAST_ODD = {"/", "\\", ":", "|", "*", ".", "'", " ", "new\nline", "<script>alert(1)</script>", "名前", "\u202eevil"}
FAST_ODD |= {"../../etc", "--flag", "a" * 300}
ODD_PARAMS = [n if n in FAST_ODD else pytest.param(n, marks=pytest.mark.slow) for n in ODD]
NUMBERS = [0, -1, -(10**12), 10**30, 2**63, 1e308, -1e308, float("inf"), float("nan")]
#: ``make test-fast`` feeds each config number key zero, a negative, a huge integer and NaN; the full suite every
#: number of NUMBERS
NUMBERS_PARAMS = [v if i in (0, 1, 3, 8) else pytest.param(v, marks=pytest.mark.slow) for i, v in enumerate(NUMBERS)]
BROKEN = ["not_utf8", "empty", "binary", "truncated", "deleted", "directory", "null", "list", "scalar"]


def _call(argv: list[str]) -> tuple[int, str, str]:
    """``interlingua ARGV`` in-process: (exit code, stdout, stderr); an escaping exception fails the test."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except Exception:  # noqa: BLE001 (what the console script would print as a traceback)
        pytest.fail(f"interlingua {' '.join(map(repr, argv))} raised:\n{traceback.format_exc()}")
    return code, out.getvalue(), err.getvalue()


def _ok_or_one_error(argv: list[str]) -> tuple[int, str, str]:
    code, out, err = _call(argv)
    errors = [line for line in err.splitlines() if line.startswith("interlingua: error:")]
    assert "Traceback (most recent call last)" not in out + err, (argv, err)
    if code == 0:
        assert not errors, (argv, err)
    else:
        assert code == 2 and len(errors) == 1, (argv, code, err)
        assert len([line for line in err.splitlines() if "error" in line.lower()]) == 1, (argv, err)
    return code, out, err


def _commands() -> list[str]:
    sub = next(a for a in _parser()._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[attr-defined]


def test_the_sweep_covers_every_command() -> None:
    swept = {"validate", "plan", "run", "report", "audit", "cache", "zoo", "init", "demo", "typology"}
    swept |= {"contamination", "measures", "check"}
    assert set(_commands()) <= swept, set(_commands()) - swept


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    sents = parallel_sentences(24, seed=4)
    path = tmp_path_factory.mktemp("sweep_corpus") / "c.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(24)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        path, sep="\t", index=False
    )
    return path


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch) -> None:
    """Each case with its own cache and working folder (default outputs such as ./interlingua-audit land there)."""
    monkeypatch.setenv("INTERLINGUA_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _broken(tmp_path: Path, kind: str, valid: bytes = b"output: out\ncorpus:\n  source: bible\n") -> Path:
    """A path where a file belongs, broken as ``kind``."""
    path = tmp_path / f"broken-{kind}.yaml"
    content = {
        "not_utf8": valid[:10] + b"\xff\xfe" + valid[10:],
        "empty": b"",
        "binary": bytes(range(256)) * 8,
        "truncated": valid[: len(valid) * 2 // 3] + b'{["',
        "null": b"~\n",
        "list": b"- a\n- b\n",
        "scalar": b"42\n",
    }.get(kind)
    if kind == "directory":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return path  # "deleted": never created


# ------------------------------------------------------------------------------------------------ broken files

CONFIG_COMMANDS = [
    ["validate"],
    ["validate", "--offline"],
    ["plan"],
    ["plan", "--offline"],
    ["run"],
    ["run", "--dry-run"],
]


@pytest.mark.parametrize("kind", BROKEN)
@pytest.mark.parametrize("command", CONFIG_COMMANDS, ids=" ".join)
def test_a_broken_config_file_is_one_error(tmp_path, command, kind) -> None:
    cfg = _broken(tmp_path, kind)
    assert _ok_or_one_error([command[0], str(cfg), *command[1:]])[0] == 2


@pytest.mark.parametrize("kind", BROKEN)
def test_a_broken_config_for_audit_is_one_error(tmp_path, kind) -> None:
    assert _ok_or_one_error(["audit", "--config", str(_broken(tmp_path, kind))])[0] == 2


@pytest.mark.parametrize("kind", [*BROKEN, "file_as_output"])
def test_report_of_a_broken_folder_is_one_error(tmp_path, kind) -> None:
    if kind == "file_as_output":
        target = tmp_path / "out"
        target.write_bytes(b"\xff")
    else:
        target = tmp_path / "out"
        target.mkdir()
        (target / "manifest.json").write_bytes(
            _broken(tmp_path, kind).read_bytes() if _broken(tmp_path, kind).is_file() else b""
        )
        (target / "results.parquet").write_bytes(b"PAR1" + bytes(range(256)))
    assert _ok_or_one_error(["report", str(target)])[0] == 2
    assert _ok_or_one_error(["report", str(tmp_path / "never")])[0] == 2


@pytest.mark.parametrize("kind", BROKEN)
def test_audit_of_broken_model_folders_and_sentence_files_is_one_error(tmp_path, kind) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    broken = _broken(tmp_path, kind)
    if broken.is_file():
        (folder / "config.json").write_bytes(broken.read_bytes())
    _ok_or_one_error(["audit", str(folder)])
    _ok_or_one_error(["audit", str(broken)])
    _ok_or_one_error(["audit", "zoo:eng", "--sentences", str(broken)])


@pytest.mark.parametrize("kind", BROKEN)
def test_contamination_of_broken_corpus_files_is_one_error(tmp_path, kind) -> None:
    _ok_or_one_error(["contamination", f"eng={_broken(tmp_path, kind)}"])


@pytest.mark.parametrize("kind", BROKEN)
def test_check_of_broken_array_files_is_one_error(tmp_path, kind) -> None:
    good = tmp_path / "good.npy"
    np.save(good, np.random.default_rng(0).standard_normal((12, 3)))
    broken = _broken(tmp_path, kind)
    assert _ok_or_one_error(["check", str(broken), str(good)])[0] == 2
    assert _ok_or_one_error(["check", str(good), str(broken)])[0] == 2


@pytest.mark.parametrize("kind", BROKEN)
def test_cache_zoo_and_init_with_a_broken_folder_are_one_error(tmp_path, kind) -> None:
    broken = _broken(tmp_path, kind)
    for argv in (
        ["cache", "list", "--cache-dir", str(broken)],
        ["cache", "size", "--cache-dir", str(broken)],
        ["zoo", "list", "--cache-dir", str(broken)],
        ["zoo", "path", "eng", "--cache-dir", str(broken)],
        ["audit", "zoo:eng", "--cache-dir", str(broken)],
    ):
        _ok_or_one_error(argv)
    code, _, _ = _ok_or_one_error(["init", "-o", str(broken)])
    if kind == "deleted":
        assert code == 0
    _ok_or_one_error(["init", "-o", str(broken / "under.yaml")])


# ------------------------------------------------------------------------------------------------ odd names


@pytest.mark.parametrize("name", ODD_PARAMS, ids=repr)
def test_odd_names_in_a_config_are_data(tmp_path, corpus, tiny_gpt2_path, name) -> None:
    base = spec_for(tmp_path, corpus, tiny_gpt2_path)
    variants: list[Callable[[dict], None]] = [
        lambda s: s["models"][0].update(name=name),
        lambda s: s["models"][0].update(path=name),
        lambda s: s["models"][0].update(path=str(tmp_path / name)),
        lambda s: s["corpus"].update(languages=["eng_Latn", name]),
        lambda s: s["corpus"].update(path=str(tmp_path / name)),
        lambda s: s.update(output=str(tmp_path / "o" / name)),
        lambda s: s.update(cache_dir=str(tmp_path / "c" / name)),
        lambda s: s.update(measures=[name]),
        lambda s: s.update(pooling=[name]),
        lambda s: s["models"].append({"name": name, "package": name}),
    ]
    cfg = tmp_path / "cfg.yaml"
    for change in variants:
        spec = yaml.safe_load(yaml.safe_dump(base))
        change(spec)
        cfg.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
        _ok_or_one_error(["validate", str(cfg)])
    _ok_or_one_error(["plan", str(cfg), "--offline"])  # the last variant: an extra model named so


@pytest.mark.parametrize("name", ODD_PARAMS, ids=repr)
def test_odd_names_on_the_command_line_are_data(tmp_path, name) -> None:
    for argv in (
        ["typology", name],
        ["typology", "eng_Latn", name],
        ["zoo", "path", name],
        ["zoo", "build", "--preset", name],
        ["audit", f"zoo:{name}"],
        ["audit", f"package:{name}"],
        ["audit", name],
        ["init", "--example", name, "-o", str(tmp_path / "x.yaml")],
        ["init", "-o", str(tmp_path / name)],
        ["cache", "list", "--cache-dir", str(tmp_path / name)],
        ["cache", "clear", "--namespace", name, "--cache-dir", str(tmp_path / "c"), "--yes"],
        ["contamination", f"{name}={tmp_path / 'none.txt'}"],
        ["contamination", f"eng={tmp_path / name}"],
        ["check", str(tmp_path / name), str(tmp_path / "none.npy")],
        ["demo", "--languages", name, "eng_Latn", "--print-config"],
        ["demo", "-o", str(tmp_path / name), "--print-config"],
        ["validate", str(tmp_path / name)],
        ["report", str(tmp_path / name)],
    ):
        _ok_or_one_error(argv)


# ------------------------------------------------------------------------------------------------ numbers


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, int) else repr(value)


@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_out_of_range_numbers_on_the_command_line(tmp_path, corpus, tiny_gpt2_path, value) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec_for(tmp_path, corpus, tiny_gpt2_path)))
    v = _num(value)
    arrays = tmp_path / "x.npy"
    np.save(arrays, np.random.default_rng(0).standard_normal((16, 4)))
    for argv in (
        ["plan", str(cfg), "--offline", "--gpus", v],
        ["plan", str(cfg), "--offline", "--gpus", "4", v],
        ["validate", str(cfg), "--offline", "--gpus", v],
        ["demo", "-n", v, "--print-config"],
        ["demo", "--permutations", v, "--print-config"],
        ["contamination", "eng=" + str(corpus), "--sample", v],
        ["contamination", "eng=" + str(corpus), "--min-chars", v],
        ["contamination", "eng=" + str(corpus), "--threshold", v],
        ["contamination", "eng=" + str(corpus), "--seed", v],
        ["check", str(arrays), str(arrays), "--batch-size", v],
        ["audit", str(tiny_gpt2_path), "--tiny-threshold", v],
        ["audit", str(tiny_gpt2_path), "--min-agreement", v],
        ["audit", str(tiny_gpt2_path), "--margin", v],
    ):
        _ok_or_one_error(argv)
    # numbers that would start real work when in range are given out of range only
    if isinstance(value, int) and value <= 0 or value != value:
        for argv in (
            ["demo", "-n", v],
            ["demo", "--permutations", v] if value < 0 else ["demo", "-n", "-1"],
            ["audit", str(tiny_gpt2_path), "--bible", "eng_Latn", "--n", v],
            ["zoo", "build", "--steps", v],
            ["zoo", "build", "--threads", v],
            ["zoo", "build", "--seed", v] if value < 0 else ["zoo", "build", "--steps", "-1"],
        ):
            assert _ok_or_one_error(argv)[0] == 2, argv


CONFIG_NUMBERS = [
    ("corpus", "n"),
    ("corpus", "min_chars"),
    ("max_length",),
    ("batch_size",),
    ("threads",),
    ("seeds", "sample"),
    ("seeds", "control"),
    ("seeds", "test"),
    ("seeds", "folds"),
    ("inference", "permutations"),
    ("inference", "jackknife_groups"),
    ("inference", "bootstrap"),
    ("maps", "folds"),
    ("maps", "bootstrap"),
    ("maps", "permutations"),
    ("quality", "n"),
    ("models", 0, "max_length"),
]


@pytest.mark.parametrize("value", NUMBERS_PARAMS, ids=repr)
@pytest.mark.parametrize("where", CONFIG_NUMBERS, ids=lambda w: ".".join(map(str, w)))
def test_out_of_range_numbers_in_a_config(tmp_path, corpus, tiny_gpt2_path, where, value) -> None:
    spec = spec_for(tmp_path, corpus, tiny_gpt2_path)
    node = spec
    for key in where[:-1]:
        node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    node[where[-1]] = value
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    _ok_or_one_error(["validate", str(cfg)])
    _ok_or_one_error(["plan", str(cfg), "--offline"])
    _ok_or_one_error(["run", str(cfg), "--dry-run"])


# ------------------------------------------------------------------------------------------------ whole runs


@pytest.mark.slow
@pytest.mark.pipeline
def test_a_run_with_odd_model_names_writes_its_report(tmp_path, corpus, tiny_gpt2_path) -> None:
    names = ["a b", "<b>bold</b>", "名前", "[x](y)", "`c`", "%s%n", "{name}", "a/b", "-rf", ".."]
    spec = spec_for(tmp_path, corpus, tiny_gpt2_path)
    spec["models"] = [{"name": n, "path": str(tiny_gpt2_path)} for n in names]
    spec["pairs"] = {"within_model": True, "cross_model": "none"}
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    assert _ok_or_one_error(["run", str(cfg)])[0] == 0
    assert _ok_or_one_error(["report", spec["output"]])[0] == 0


@pytest.mark.slow
@pytest.mark.pipeline
def test_a_run_with_a_dollar_in_a_model_name_writes_its_report(tmp_path, corpus, tiny_gpt2_path) -> None:
    spec = spec_for(tmp_path, corpus, tiny_gpt2_path)
    spec["models"] = [{"name": "ft$50%", "path": str(tiny_gpt2_path)}]
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    assert _ok_or_one_error(["run", str(cfg)])[0] == 0


# ------------------------------------------------------------------------------------------------ the Python API


@pytest.mark.parametrize("bad", [None, 42, "", "   ", b"cfg.yaml", ["cfg.yaml"]], ids=repr)
def test_load_spec_of_a_non_path_is_a_config_error(bad) -> None:
    import interlingua
    from interlingua.core.errors import ConfigError

    with pytest.raises(ConfigError, match="load_spec takes the path of a YAML config"):
        interlingua.load_spec(bad)


@pytest.mark.pipeline
def test_run_of_a_spec_whose_output_is_none_runs_in_memory(tmp_path, corpus, tiny_gpt2_path) -> None:
    import interlingua

    spec = spec_for(tmp_path, corpus, tiny_gpt2_path)
    spec["output"] = None
    mapping = interlingua.run(spec)
    assert mapping.output is None and len(mapping.table) > 0
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["cache"]
    model = interlingua.load_spec(_written(tmp_path, {**spec, "output": "x"})).model_copy(update={"output": None})
    again = interlingua.run(model)
    assert again.output is None and again.cache_misses == 0  # the first in-memory run filled the cache
    pd.testing.assert_frame_equal(mapping.table, again.table)


def _written(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path
