"""The cost before the run (``interlingua plan``, ``run --dry-run``, ``validate``'s line) and progress that names
what it does (bars, the final summary). Facts about the plan and the cost model; no timing asserts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fixtures.tiny_models import parallel_sentences
from interlingua.cli import main
from interlingua.pipeline import cost
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.plan import build_plan
from interlingua.pipeline.preflight import preflight

pytestmark = pytest.mark.pipeline

CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sents = parallel_sentences(48, seed=5)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(48)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        path, sep="\t", index=False
    )
    return path


def _spec(root: Path, corpus_path: Path, gpt2: Path, llama: Path, **over: object) -> dict:
    spec = {
        "output": str(root / "out"),
        "cache_dir": str(root / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus_path), "languages": ["eng_Latn", "deu_Latn"], "n": 16},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased", "procrustes_resid2_centered_unitnorm"],
        "inference": {"permutations": 9},
        "special_tokens": "include",
    }
    spec.update(over)
    return spec


def _kinds(text: str) -> dict[str, tuple[str, ...]]:
    """``kind -> (total, stored, to run)`` from the plan table."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(extract|compare|map|align)\s+(\d+)\s+(\S+)\s+(\d+)", line.strip())
        if m:
            out[m.group(1)] = m.groups()[1:]
    return out


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    """Plan, run (CLI, progress shown), plan again; the printed text of each."""
    root = tmp_path_factory.mktemp("costrun")
    cfg = root / "run.yaml"
    cfg.write_text(yaml.safe_dump(_spec(root, corpus_tsv, tiny_gpt2_path, tiny_llama_path, progress=True)))
    import contextlib
    import io

    texts = {}
    for name, argv in (
        ("before", ["plan", str(cfg)]),
        ("dry", ["run", str(cfg), "--dry-run"]),
        ("run", ["run", str(cfg)]),
        ("after", ["plan", str(cfg)]),
    ):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert main(argv) == 0
        texts[name] = (out.getvalue(), err.getvalue())
    return root, texts


def test_plan_lists_the_tasks_and_marks_stored_ones_after_a_run(cli_run) -> None:
    root, texts = cli_run
    before = _kinds(texts["before"][0])
    # 2 models x 2 languages read; within-model pairs (1 per model) + same-language cross pairs (2), one pooling
    assert before == {"extract": ("4", "0", "4"), "compare": ("4", "0", "4")}
    assert _kinds(texts["dry"][0]) == before  # run --dry-run prints the plan and runs nothing
    assert not (root / "out" / "results.csv").exists() or texts["run"][0]
    assert _kinds(texts["after"][0]) == {"extract": ("4", "4", "0"), "compare": ("4", "4", "0")}
    for phase in ("extraction", "comparisons", "outputs"):
        assert phase in texts["before"][0]


def test_the_final_summary_lists_every_written_file_and_a_wall_time_over_the_phases(cli_run) -> None:
    root, texts = cli_run
    line = texts["run"][0].strip().splitlines()[-1]
    manifest = json.loads((root / "out" / "manifest.json").read_text())
    listed = re.search(r"files: (.*) \(wall", line).group(1).split(", ")
    assert sorted(listed) == sorted([*manifest["files"], "manifest.json"])
    wall = float(re.search(r"wall ([\d.]+) s", line).group(1))
    phases = [float(v) for v in re.findall(r"(?:preflight|plan|execute|assemble) ([\d.]+) s", line)]
    assert len(phases) == 4 and wall >= sum(phases) - 0.2  # each printed to 0.1 s
    for ns in ("representations 0 from the cache, 4 computed", "comparisons 0 from the cache, 4 computed"):
        assert ns in line


def test_bars_name_the_model_language_pair_and_measure(cli_run) -> None:
    _, texts = cli_run
    err = texts["run"][1]
    for model in ("gpt2", "llama"):
        for lang in CODES.values():
            assert f"hidden states of model {model!r} (float32) on {lang}" in err
    assert "gpt2:eng_Latn|llama:eng_Latn mean: procrustes_resid2_centered_unitnorm layer" in err


def test_progress_labels_name_what_they_read() -> None:
    from interlingua.comparison.capability import CompareTask
    from interlingua.contract.pairs import Pair, Side
    from interlingua.data.representations.extract import progress_label
    from interlingua.pipeline.execute import task_label
    from interlingua.pipeline.plan import ExtractTask

    assert progress_label("model 'm' (float32) on eng_Latn") == "hidden states of model 'm' (float32) on eng_Latn"
    assert task_label(ExtractTask("k", "m", "deu_Latn", (), ())) == "extract m on deu_Latn"
    pair = Pair(Side("a", "eng_Latn"), Side("b", "eng_Latn"))
    assert task_label(CompareTask("k", pair, "sgpt", ("x", "y"), False, 0)) == "compare a:eng_Latn|b:eng_Latn sgpt"


@pytest.fixture()
def fixed_rates(monkeypatch):
    """Calibration pinned, so the estimate is a function of the plan alone."""
    monkeypatch.setattr(cost, "matmul_rate", lambda dtype="float64": 1e9)
    monkeypatch.setattr(cost, "measure_overheads", lambda mid: (1e-3, 1e-3, 1e-4))
    monkeypatch.setattr(cost, "mean_tokens", lambda sentences, folder, max_length: (12.0, "fixed"))


def _estimate(tmp_path, corpus_tsv, gpt2, llama, **over) -> cost.CostEstimate:
    spec = parse_spec(_spec(tmp_path, corpus_tsv, gpt2, llama, **over))
    checked = preflight(spec)
    return cost.estimate_checked(checked)[1]


def test_the_estimate_is_linear_in_permutations_and_sentences(
    fixed_rates, tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    comp = [
        _estimate(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, inference={"permutations": k})
        .phase("comparisons")
        .seconds
        for k in (100, 200, 300)
    ]
    assert comp[0] < comp[1] < comp[2]
    assert comp[2] - comp[1] == pytest.approx(comp[1] - comp[0], rel=1e-9)
    ext = [
        _estimate(
            tmp_path,
            corpus_tsv,
            tiny_gpt2_path,
            tiny_llama_path,
            batch_size=8,
            corpus={"source": "local", "path": str(corpus_tsv), "languages": ["eng_Latn", "deu_Latn"], "n": n},
        )
        .phase("extraction")
        .seconds
        for n in (16, 32, 48)
    ]
    assert ext[2] - ext[1] == pytest.approx(ext[1] - ext[0], rel=1e-9) and ext[1] > ext[0]


def test_moments_and_last_layer_inference_cost_less(
    fixed_rates, tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    def comparisons(**inference: object) -> dict[str, float]:
        est = _estimate(
            tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, inference={"permutations": 500, **inference}
        )
        return est.phase("comparisons").parts

    base = comparisons()
    moments = comparisons(null_method="moments")
    assert moments["cka_linear_biased"] < base["cka_linear_biased"]
    assert moments["procrustes_resid2_centered_unitnorm"] == base["procrustes_resid2_centered_unitnorm"]
    last = comparisons(layers="last")
    assert all(last[m] < base[m] for m in base)  # within-model pairs test 3 or 4 layers with "all", 1 with "last"


def test_the_plan_states_each_phases_peak_memory_and_the_grid_null_is_the_quadratic_part(
    fixed_rates, tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    from interlingua.analysis.inference._gram import grid_null_peak_bytes
    from interlingua.analysis.measures.cka import cka_grid_peak_bytes

    plain = _estimate(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    grid = _estimate(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, layer_grid=True)
    assert plain.peak_bytes == max(p.peak_bytes for p in plain.phases) > 0
    assert plain.phase("extraction").peak_bytes > 0
    sa, sb = grid.models["gpt2"], grid.models["llama"]
    n, la, lb = 16, sa.layers + 1, sb.layers + 1
    null = grid_null_peak_bytes(n, la, lb)
    assert null > cka_grid_peak_bytes(n, [sa.hidden] * la, [sb.hidden] * lb)  # at tiny widths the null dominates
    assert grid.phase("comparisons").peak_bytes >= null > plain.phase("comparisons").peak_bytes
    table = "\n".join(cost.format_plan(grid))
    assert "peak mem" in table
    assert re.search(r"comparisons\s+\S+( \S+)?\s+\d+ MiB", table)


def test_a_prepared_permutation_costs_rank_sized_work_not_width_sized() -> None:
    n = 40
    _, _, narrow = cost.measure_flops("procrustes_resid2_centered_unitnorm", n, 64, 64)
    _, _, wide = cost.measure_flops("procrustes_resid2_centered_unitnorm", n, 2048, 2048)
    assert narrow == wide  # both sides have rank <= n: an n x n step per permutation
    direct_narrow, _, _ = cost.measure_flops("procrustes_resid2_centered_unitnorm", n, 64, 64)
    direct_wide, _, _ = cost.measure_flops("procrustes_resid2_centered_unitnorm", n, 2048, 2048)
    assert direct_wide > 1000 * direct_narrow  # the direct call's p x q SVD grows with the cube of the width
    _, _, gram = cost.measure_flops("cka_linear_debiased", n, 64, 2048)
    assert gram == cost.GATHER_COST * n * n  # a Gram gather: independent of the widths
    _, _, feature = cost.measure_flops("cka_linear_debiased", 1000, 8, 8)
    assert feature == 2.0 * 1000 * 64  # narrow sides: the null's feature form ||X^T Y[p]||^2, as inference does


def test_a_long_estimate_warns_with_the_cheaper_choices(
    fixed_rates, tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    est = _estimate(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, inference={"permutations": 10**6})
    assert est.phase("comparisons").seconds > 0.5 * est.seconds
    assert cost.long_run_warning(est, None, threshold=est.seconds + 1) is None
    line = cost.long_run_warning(est, None, threshold=0.0)
    assert line is not None and line.startswith("interlingua: warning:")
    for idea in ("inference.permutations", "null_method: moments", "inference.layers: last", "corpus.n"):
        assert idea in line


def test_model_shape_from_config_counts_the_blocks_weights(tiny_gpt2_path, tiny_llama_path) -> None:
    for path in (tiny_gpt2_path, tiny_llama_path):
        cfg = json.loads((Path(path) / "config.json").read_text())
        shape = cost.model_shape({"folder": str(path)})
        assert shape.source == "config.json"
        assert shape.hidden == cfg.get("hidden_size", cfg.get("n_embd"))
        assert shape.layers == cfg.get("num_hidden_layers", cfg.get("n_layer"))
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(tiny_gpt2_path)
    blocks = sum(
        p.numel() for name, p in model.named_parameters() if name.startswith("h.") and p.dim() == 2
    )  # the per-token matmul weights (no biases, norms)
    assert cost.model_shape({"folder": str(tiny_gpt2_path)}).params == blocks
    del torch


def test_validate_prints_the_task_counts_and_imports_no_torch(
    tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    cfg = tmp_path / "v.yaml"
    cfg.write_text(yaml.safe_dump(_spec(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)))
    code = (
        "import sys, contextlib, io\nfrom interlingua.cli import main\nout = io.StringIO()\n"
        f"with contextlib.redirect_stdout(out): rc = main(['validate', {str(cfg)!r}])\n"
        "print(out.getvalue()); print('torch' in sys.modules, rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "False 0"
    assert any(line.startswith("plan: 4 extract, 4 compare task(s)") for line in lines)
    assert not any("estimated" in line for line in lines)  # the estimate is plan's (it knows the store)


def test_plan_of_a_bad_config_is_exit_2(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, capsys) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump(_spec(tmp_path, corpus_tsv, tiny_gpt2_path, tmp_path / "no-such-model")))
    assert main(["plan", str(cfg)]) == 2
    assert "no-such-model" in capsys.readouterr().err


def test_build_plan_with_unhashed_fingerprints_counts_like_the_real_plan(
    tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    spec = parse_spec(_spec(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path))
    checked = preflight(spec)
    real = build_plan(checked.spec, checked.corpus, checked.fingerprints).summary()
    assert build_plan(checked.spec, checked.corpus, cost.unhashed_fingerprints(checked.spec)).summary() == real


def test_model_shape_from_a_gguf_header(tmp_path) -> None:
    gguf = pytest.importorskip("gguf")
    from interlingua.data.models import ModelSpec
    from interlingua.data.models.preflight import preflight_model

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(3)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    shape = cost.model_shape(preflight_model(ModelSpec(path=str(path))))
    assert (shape.source, shape.layers, shape.hidden) == ("GGUF header", 3, 64)
    head_dim = 64 // 4
    assert shape.params == 3 * (64 * head_dim * 2 * (4 + 2) + 3 * 64 * 128)  # q, o + k, v (2 KV heads); gated MLP


def test_the_forward_rate_is_the_one_thread_rate_scaled_by_the_runs_threads() -> None:
    """One thread: FORWARD_EFFICIENCY of the one-thread matmul rate; each further thread adds THREAD_SCALING of it."""
    from interlingua.core.numerics import default_threads

    one = cost.forward_rate(1e11, 1)
    assert one == pytest.approx(1e11 * cost.FORWARD_EFFICIENCY)
    assert cost.forward_rate(1e11, 3) == pytest.approx(one * (1 + 2 * cost.THREAD_SCALING))
    assert cost.forward_rate(1e11, "auto") == pytest.approx(cost.forward_rate(1e11, default_threads()))


def test_the_matmul_rate_is_measured_on_one_blas_thread_and_leaves_the_callers_count(monkeypatch) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    seen: list[list[int]] = []
    real = cost.time.perf_counter

    def spy() -> float:
        seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        return real()

    cost.matmul_rate.cache_clear()
    with threadpool_limits(limits=2, user_api="blas"):
        before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        monkeypatch.setattr(cost.time, "perf_counter", spy)
        assert cost.matmul_rate("float64") > 0
        monkeypatch.undo()
        assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
    cost.matmul_rate.cache_clear()
    assert seen and all(t == [1] * len(t) for t in seen)
