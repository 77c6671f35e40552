"""Fault injection: a run killed with SIGKILL at several points, then rerun to completion.

The run happens in a subprocess (``python -c`` calling ``interlingua.pipeline.runs.run``
on a spec JSON) that is killed once the Nth entry has appeared in the cache
folder, or once its outputs are being built; a rerun in this process must then
give the uninterrupted run's table, find only whole entries (nothing rebuilt,
every stored one reused), leave no temporary file behind and never show a
half-written output folder.

The resumed table must equal the uninterrupted one byte for byte: the numbers do not
depend on the process that computes them (``interlingua.core.numerics``).
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from fixtures.tables import assert_same_table
from fixtures.tiny_models import parallel_sentences
from interlingua.pipeline.runs import RunResult, run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

N = 10
ENTRY_NAMESPACES = ("facts", "representations", "comparisons")
# 2 facts + 2 models x 2 languages (one pooling) + 4 pairs: 10 entries in all
TOTAL_ENTRIES = 2 + 4 + 4
CHILD = (
    "import json, sys, warnings\n"
    "warnings.simplefilter('ignore')\n"
    "from interlingua.pipeline.runs import run\n"
    "run(json.load(open(sys.argv[1])))\n"
)


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(N, seed=5)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(N)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        path, sep="\t", index=False
    )
    return path


def spec_in(root: Path, corpus: Path, gpt2: Path, llama: Path) -> dict:
    return {
        "output": str(root / "out"),
        "cache_dir": str(root / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 9, "jackknife_groups": 4, "grid_permutations": 4},
        "layer_grid": True,
    }


def quiet_run(spec: dict) -> RunResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run(spec)


def finished_entries(cache: Path, namespaces: tuple[str, ...] = ENTRY_NAMESPACES) -> int:
    return sum(
        1
        for ns in namespaces
        if (cache / ns).is_dir()
        for p in (cache / ns).rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )


def temp_files(*folders: Path) -> list[Path]:
    return sorted(
        p
        for f in folders
        if f.exists()
        for p in f.rglob("*")
        if p.name.startswith((".tmp-", ".out.")) or ".partial-" in p.name
    )


def output_is_absent_or_complete(out: Path) -> bool:
    if not out.exists():
        return True
    manifest = json.loads((out / "manifest.json").read_text())["files"]
    present = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    if present != sorted([*manifest, "manifest.json"]):
        return False
    return all(hashlib.sha256((out / f).read_bytes()).hexdigest() == digest for f, digest in manifest.items())


def run_and_kill(spec: dict, root: Path, kill_at: int | str) -> None:
    """Run ``spec`` in a subprocess and SIGKILL it at ``kill_at``."""
    spec_file = root / "spec.json"
    spec_file.write_text(json.dumps(spec))
    cache, parent = Path(spec["cache_dir"]), Path(spec["output"]).parent
    with (root / "child.err").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(spec_file)], stdout=subprocess.DEVNULL, stderr=err)
    try:
        while proc.poll() is None:
            if kill_at == "outputs":
                reached = any(".partial-" in p.name for p in parent.iterdir())
            else:
                reached = finished_entries(cache) >= kill_at
            if reached:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, (
        f"the run ended (exit {proc.returncode}) before the kill point {kill_at!r}:\n"
        + (root / "child.err").read_text(errors="replace")[-3000:]
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus_tsv, tiny_gpt2_path, tiny_llama_path) -> bytes:
    """results.csv of an uninterrupted run."""
    root = tmp_path_factory.mktemp("reference")
    spec = spec_in(root, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    res = quiet_run(spec)
    assert res.info["computed"] == {"extract": 4, "compare": 4}
    assert finished_entries(Path(spec["cache_dir"])) == TOTAL_ENTRIES
    return (Path(spec["output"]) / "results.csv").read_bytes()


# entries appear in this order: facts + 2 sides of gpt2, facts + 2 sides of llama, 4 comparisons;
# 5 kills during llama's extraction, 8 during the comparisons, "outputs" while the outputs are built
@pytest.mark.parametrize("kill_at", [5, TOTAL_ENTRIES - 2, "outputs"])
def test_a_killed_run_resumes_to_the_uninterrupted_result(
    kill_at, reference, tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    spec = spec_in(tmp_path / "run", corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    (tmp_path / "run").mkdir()
    cache, out = Path(spec["cache_dir"]), Path(spec["output"])
    run_and_kill(spec, tmp_path, kill_at)
    assert finished_entries(cache) >= (TOTAL_ENTRIES if kill_at == "outputs" else kill_at)
    stored = {ns: finished_entries(cache, (ns,)) for ns in ("representations", "comparisons")}
    from interlingua.data.models.fingerprint import spec_fingerprint
    from interlingua.data.models.spec import ModelSpec

    folders = {m["name"]: spec_fingerprint(ModelSpec(**m), cache_dir=cache / "models")[:16] for m in spec["models"]}
    unfinished = [m for m in ("gpt2", "llama") if finished_entries(cache / "representations", (folders[m],)) < 2]
    assert output_is_absent_or_complete(out)

    res = quiet_run(spec)
    for ns in ENTRY_NAMESPACES:  # the killed run left only whole entries
        assert res.info["cache"][ns]["rebuilt"] == 0, ns
    for ns, count in stored.items():  # and every one of them is reused
        assert res.info["cache"][ns]["hits"] == count, ns
    assert res.models_loaded == unfinished  # only a model with a side left to extract is loaded
    assert_same_table(out / "results.csv", reference)
    assert output_is_absent_or_complete(out)
    assert temp_files(cache) == []  # the killed writer's temporary file is swept
    # the killed run's build folder is tidied by the next run (the old code never removed it after SIGKILL)
    assert temp_files(out.parent) == []
