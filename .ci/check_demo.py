"""CI check of a finished demo: every output exists and the headline is matched > shuffled."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

out = Path(sys.argv[1])
for name in ("report.md", "results.csv", "results.parquet", "run.json", "controls.json", "manifest.json"):
    assert (out / name).is_file(), f"demo output {name} is missing"
assert list((out / "figures").glob("*.png")), "demo wrote no figures"
info = json.loads((out / "run.json").read_text())
assert info["cache"]["representations"]["hits"] == 0, "the CI demo must start from an empty cache"
table = pd.read_parquet(out / "results.parquet")
spec = info["spec"]
rows = table[(~table["grid"]) & (table["measure"] == spec["measures"][0]) & (table["pooling"] == spec["pooling"][0])]
last = rows[rows.groupby("pair")["layer_a"].transform("max") == rows["layer_a"]]
assert len(last) == table["pair"].nunique(), "one last-layer row per pair expected"
assert (last["matched"] > last["shuffled"]).all(), last[["pair", "matched", "shuffled"]].to_string()
print(f"ci: demo ok: {len(last)} pairs, last-layer matched {last['matched'].min():.3f}-{last['matched'].max():.3f} "
      f"> shuffled {last['shuffled'].min():.3f}-{last['shuffled'].max():.3f}; {info['seconds']:.0f} s")

# word-aligned pooling: rows are aligned words (more rows than aligned verses), matched > shuffled at the last layer
words = table[(~table["grid"]) & (table["measure"] == spec["measures"][0]) & (table["pooling"] == "word_aligned")]
if "word_aligned" in spec["pooling"]:
    wl = words[words.groupby("pair")["layer_a"].transform("max") == words["layer_a"]]
    assert len(wl) == len(spec["alignment"]["pairs"]), wl[["pair", "n"]].to_string()
    assert (wl["n"] > spec["alignment"]["n"]).all() and (wl["matched"] > wl["shuffled"]).all(), wl.to_string()
    assert (out / "alignments.csv").is_file() and (out / "word_controls.json").is_file()
    print(f"ci: word-aligned ok: {len(wl)} pairs, {wl['n'].min()}-{wl['n'].max()} word rows, last-layer matched "
          f"{wl['matched'].min():.3f}-{wl['matched'].max():.3f} > shuffled {wl['shuffled'].max():.3f}")

# mergeability: the two packaged models share no parameter space, and the coverage says why
merge = pd.read_csv(out / "mergeability.csv", keep_default_na=False)
assert (merge["route"] != "native").all() and (merge["shared_tensors"] == 0).all(), merge.to_string()
assert merge["reason"].str.contains("hidden width A 640, B 576").all(), merge["reason"].tolist()
print(f"ci: mergeability ok: {merge['pair'].iat[0]} route {merge['route'].iat[0]}, 0 shared tensors")

# the audit demo (OUTPUT-audit): the staged uploads are caught, the rebuilt merge is a language model again
audit_out = Path(str(out).rstrip("/") + "-audit")
if audit_out.exists():
    audit = pd.read_csv(audit_out / "audit.csv", keep_default_na=False).set_index("model")
    uploaded = audit.loc[[m for m in audit.index if m.startswith("uploaded-merged")]]
    assert (uploaded["adapter_verdict"] == "identity").all(), uploaded["adapter_verdict"]
    assert (uploaded["tokenizer_verdict"] == "mismatched tokenizer").all()
    rebuilt = audit.loc["rebuilt-merged/alpha=1,top_k=1"]
    assert rebuilt["nll"] < uploaded["nll"].min() - 0.5, (rebuilt["nll"], uploaded["nll"].min())
    sweeps = pd.read_csv(audit_out / "sweeps.csv", keep_default_na=False).set_index("sweep")
    assert sweeps.loc["uploaded-merged", "verdict"] == "a measurement of a constant"
    assert sweeps.loc["rebuilt-merged", "n_distinct"] == sweeps.loc["rebuilt-merged", "n_models"]
    print(f"ci: audit demo ok: uploaded NLL {uploaded['nll'].min():.3f} (chance {rebuilt['chance_nll']:.3f}), "
          f"rebuilt {rebuilt['nll']:.3f}; uploaded sweep constant")
else:
    raise SystemExit(f"the audit demo's output {audit_out} is missing")
