"""The Ray executor on a local Ray instance: same results as a local run, retries, resume, nothing resubmitted."""

from __future__ import annotations

import filecmp
import json
import logging
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

ray = pytest.importorskip("ray")

from fixtures.tables import assert_same_table  # noqa: E402
from fixtures.tiny_models import parallel_sentences  # noqa: E402
from interlingua.audit.capability import AuditGateTask, AuditTask  # noqa: E402
from interlingua.cli import main  # noqa: E402
from interlingua.comparison.capability import CompareTask  # noqa: E402
from interlingua.comparison.capability import run as run_compare  # noqa: E402
from interlingua.core.errors import ConfigError  # noqa: E402
from interlingua.pipeline.execute import run_extract  # noqa: E402
from interlingua.pipeline.executors import RayExecutor, make_executor  # noqa: E402
from interlingua.pipeline.executors.ray import _probe_store, group_tasks, stages  # noqa: E402
from interlingua.pipeline.plan import ExtractTask  # noqa: E402
from interlingua.pipeline.runs import run  # noqa: E402

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}
TABLES = ("results.csv", "maps.csv")


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the module (2 CPUs), shut down after."""
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(40, seed=3)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(40)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        path, sep="\t", index=False
    )
    return path


@pytest.fixture(scope="module")
def make_spec(corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    def spec(folder: Path, cache: Path | None = None) -> dict:
        return {
            "output": str(folder / "out"),
            "cache_dir": str(cache or folder / "cache"),
            "progress": False,
            "corpus": {"source": "local", "path": str(corpus_tsv), "languages": ["eng_Latn", "deu_Latn"], "n": 32},
            "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}, {"name": "llama", "path": str(tiny_llama_path)}],
            "pooling": ["mean", "last"],
            "measures": ["cka_linear_biased"],
            "inference": {"permutations": 19, "jackknife_groups": 4},
            "layer_grid": True,
            "special_tokens": "include",
            "maps": {"estimators": ["procrustes"], "folds": 2, "bootstrap": 0},
        }

    return spec


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, make_spec):
    """The reference: the same config through the LocalExecutor."""
    folder = tmp_path_factory.mktemp("local")
    res = run(make_spec(folder))
    return SimpleNamespace(folder=folder, out=folder / "out", result=res)


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory, make_spec, ray_instance):
    """The same config through Ray, on a fresh store."""
    folder = tmp_path_factory.mktemp("ray")
    ex = RayExecutor()
    res = run(make_spec(folder), executor=ex)
    return SimpleNamespace(
        folder=folder,
        out=folder / "out",
        cache=folder / "cache",
        result=res,
        executor=ex,
        submitted=list(ex.submitted),
        groups=list(ex.groups),
    )


def same_tables(a: Path, b: Path) -> None:
    """Tables computed in other processes (Ray workers): byte for byte, as in one process."""
    for name in TABLES:
        assert_same_table(b / name, (a / name).read_bytes())


def identical_tables(a: Path, b: Path) -> None:
    """Tables read back from the same stored entries: byte for byte."""
    for name in TABLES:
        assert filecmp.cmp(a / name, b / name, shallow=False), f"{name} differs"


def test_ray_run_writes_what_a_local_run_writes(local_run, ray_run):
    same_tables(local_run.out, ray_run.out)
    local_info = json.loads((local_run.out / "run.json").read_text())
    ray_info = json.loads((ray_run.out / "run.json").read_text())
    for field in ("computed", "cache", "plan", "models", "truncated"):
        if field == "cache":
            local_info[field].pop("root"), ray_info[field].pop("root")
        assert ray_info[field] == local_info[field], field
    assert sorted(ray_run.result.models_loaded) == sorted(local_run.result.models_loaded) == ["gpt2", "llama"]
    # one Ray task per model for its extractions (each model loads once), one per comparison or map
    plan = ray_info["plan"]
    assert sorted(g for g in ray_run.groups if g.startswith("extract:")) == ["extract:gpt2", "extract:llama"]
    assert len(ray_run.groups) == 2 + plan["compare"] + plan["maps"]
    assert len(ray_run.submitted) == sum(plan.values())
    assert (ray_run.out / "figures" / "map_clouds.png").is_file()  # its sides read back from the store


def test_a_second_run_submits_no_task(ray_run, make_spec):
    ex = RayExecutor()
    spec = make_spec(ray_run.folder / "again", cache=ray_run.cache)
    res = run(spec, executor=ex)
    assert ex.submitted == [] and ex.groups == []
    assert res.models_loaded == [] and res.cache_misses == 0 and res.cache_hits == 2 * 2 * 2
    identical_tables(ray_run.out, Path(spec["output"]))  # nothing recomputed


def test_a_rerun_after_a_crash_computes_only_what_is_missing(ray_run, make_spec, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(ray_run.cache, cache)
    # what a run killed mid-way leaves: one side's representation and one comparison never written
    lost_side = sorted((cache / "representations").rglob("deu_Latn.mean.*.safetensors"))[0]
    lost_rows = sorted((cache / "comparisons").glob("*.json"))[0]
    lost_side.unlink()
    lost_rows.unlink()
    ex = RayExecutor()
    res = run(make_spec(tmp_path, cache=cache), executor=ex)
    assert len(ex.submitted) == 2
    assert sorted(g.split(":")[0] for g in ex.groups) == ["compare", "extract"]
    assert res.info["computed"] == {"extract": 1, "compare": 1}
    assert len(res.models_loaded) == 1
    assert lost_side.is_file() and lost_rows.is_file()
    same_tables(ray_run.out, tmp_path / "out")


def test_comparisons_in_side_blocks_give_the_same_rows(ray_run, make_spec, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(ray_run.cache, cache)
    for entry in (cache / "comparisons").glob("*.json"):
        entry.unlink()
    ex = RayExecutor(side_block=2)  # sides: gpt2 x {eng, deu} | llama x {eng, deu}
    res = run(make_spec(tmp_path, cache=cache), executor=ex)
    assert sorted(ex.groups) == ["pairs:0x0", "pairs:0x1", "pairs:1x1"]  # 8 comparisons in 3 Ray tasks
    assert res.info["computed"] == {"compare": 8} and res.models_loaded == []
    same_tables(ray_run.out, tmp_path / "out")


def test_killed_workers_are_retried_and_lose_nothing_finished(local_run, make_spec, ray_instance, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()

    def first(name: str) -> bool:
        """True once across every worker and attempt (an exclusive create)."""
        try:
            os.close(os.open(markers / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    def extract_then_die(rt, task, done):
        out = run_extract(rt, task, done)  # this side is stored (atomically) ...
        if first("extract"):
            path = sorted(rt.store.folder("representations").rglob(f"{task.language}.*.safetensors"))[0]
            (markers / "extract.json").write_text(json.dumps({"path": str(path), "inode": os.stat(path).st_ino}))
            os._exit(1)  # ... then the worker dies before its model's other language
        return out

    def die_then_compare(rt, task, done):
        if first("compare"):
            os._exit(1)
        return run_compare(rt, task, done)

    ex = RayExecutor(runners={"extract": extract_then_die, "compare": die_then_compare})
    res = run(make_spec(tmp_path), executor=ex)
    assert (markers / "extract").exists() and (markers / "compare").exists()  # both workers did die
    same_tables(local_run.out, tmp_path / "out")
    # the retried model group read the side its killed attempt had stored, and computed only the other
    assert res.info["computed"]["extract"] == 3
    kept = json.loads((markers / "extract.json").read_text())
    assert os.stat(kept["path"]).st_ino == kept["inode"]  # never rewritten


def test_a_failing_task_is_not_retried_and_raises_its_own_error(ray_run, make_spec, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(ray_run.cache, cache)
    for entry in (cache / "comparisons").glob("*.json"):
        entry.unlink()
    log = tmp_path / "attempts.txt"

    def bad_input(rt, task, done):
        with open(log, "a") as fh:
            fh.write(task.key + "\n")
        raise ConfigError(f"planted failure in {task.pair.label}")

    spec = make_spec(tmp_path, cache=cache)
    with pytest.raises(ConfigError, match="planted failure"):
        run(spec, executor=RayExecutor(runners={"compare": bad_input}))
    attempts = log.read_text().split()
    assert attempts and len(attempts) == len(set(attempts))  # an input error is not retried
    assert not Path(spec["output"]).exists()  # nothing written


def test_cli_run_with_the_ray_executor(ray_run, make_spec, tmp_path, capsys):
    spec = make_spec(tmp_path, cache=ray_run.cache)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    assert main(["run", str(cfg), "--executor", "ray"]) == 0  # joins the running instance
    same_tables(ray_run.out, tmp_path / "out")
    assert main(["run", str(cfg), "--address", "auto", "-o", str(tmp_path / "other")]) == 2
    assert "--executor ray" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--executor" in capsys.readouterr().out and isinstance(make_executor("ray"), RayExecutor)


def test_stages_cut_at_the_gate_and_groups_load_each_model_once():
    models = {
        "a": SimpleNamespace(path="/m/base", package=None),
        "b": SimpleNamespace(path="/m/base", package=None),
        "c": SimpleNamespace(path="/m/other", package=None),
    }
    audits = [AuditTask(f"au{m}", m, "eng_Latn") for m in "abc"]
    gate = AuditGateTask("gate", depends=tuple(t.key for t in audits))
    extracts = [ExtractTask(f"ex{m}{lang}", m, lang, (), ()) for m in "ab" for lang in ("eng", "deu")]
    compare = CompareTask("cmp", None, "mean", ("exaeng", "exbdeu"), False, 0, depends=("exaeng", "exbdeu"))  # type: ignore[arg-type]
    plan = SimpleNamespace(tasks=[*audits, gate, *extracts, compare], models=models)
    cut = stages(plan)  # type: ignore[arg-type]
    assert [([t.key for t in tasks], b.key if b else None) for tasks, b in cut] == [
        (["aua", "aub", "auc"], "gate"),
        (["exaeng", "exadeu", "exbeng", "exbdeu", "cmp"], None),
    ]
    first = group_tasks(plan, cut[0][0])  # type: ignore[arg-type]
    assert [(g.name, g.keys) for g in first] == [("lm:/m/base", ("aua", "aub")), ("lm:/m/other", ("auc",))]
    second = group_tasks(plan, cut[1][0])  # type: ignore[arg-type]
    assert [(g.name, g.keys, g.depends) for g in second] == [
        ("extract:a", ("exaeng", "exadeu"), ()),
        ("extract:b", ("exbeng", "exbdeu"), ()),
        ("compare:cmp", ("cmp",), ("exaeng", "exbdeu")),
    ]
    assert [g.loads_model for g in second] == [True, True, False]
    other = CompareTask("cmp2", None, "mean", ("exadeu", "exbeng"), False, 0, depends=("exadeu", "exbeng"))  # type: ignore[arg-type]
    plan.tasks.append(other)
    blocked = group_tasks(plan, [*cut[1][0], other], side_block=2)  # type: ignore[arg-type]
    assert [(g.name, g.keys) for g in blocked][2:] == [("pairs:0x1", ("cmp", "cmp2"))]


def test_store_probe_tells_a_shared_path_from_a_missing_one(tmp_path):
    probe = tmp_path / ".probe"
    probe.write_text("token")
    assert _probe_store(str(probe), "token")["writable"] is True
    assert _probe_store(str(tmp_path / "elsewhere"), "token")["seen"] is False


def test_word_aligned_pooling_through_ray_equals_local(make_spec, ray_instance, tmp_path):
    """Align tasks, word entries (read back from the store by the driver) and word-row comparisons on Ray."""

    def spec(folder: Path) -> dict:
        s = make_spec(folder)
        s.pop("maps")
        s.update(pooling=["mean", "word_aligned"], layer_grid=False, alignment={"encoder": "gpt2", "layer": 1, "n": 16})
        return s

    local = run(spec(tmp_path / "local"))
    ex = RayExecutor()
    remote = run(spec(tmp_path / "ray"), executor=ex)
    assert filecmp.cmp(local.output / "word_controls.json", remote.output / "word_controls.json", shallow=False)
    pd.testing.assert_frame_equal(
        pd.read_csv(local.output / "alignments.csv").drop(columns="seconds"),
        pd.read_csv(remote.output / "alignments.csv").drop(columns="seconds"),
    )
    # the same word vectors and rows, and one BLAS thread in every process: the same bytes
    assert_same_table(remote.output / "results.csv", (local.output / "results.csv").read_bytes())
    assert local.info["computed"]["alignment"] == remote.info["computed"]["alignment"] == 3
    assert any(g.startswith("alignment:") for g in ex.groups)
