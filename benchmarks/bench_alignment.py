"""Benchmark: SimAlign-style word alignment, interlingua vs the ``simalign`` package, and the real offline aligner.

Part 1, equality and speed against ``simalign`` (0.4): same encoder, same
sentence pairs, same methods, same thread count.

- Encoder. Offline there is no multilingual BERT, so the script builds one
  reproducibly: a cased WordPiece tokenizer (``tokenizers``; BERT normaliser
  without lowercasing, BERT pre-tokenizer, ``[CLS] $A [SEP]``) trained on
  every English and German verse of the packaged Bible, and a randomly
  initialised ``transformers.BertModel`` (default 12 layers, hidden 384, 12
  heads, FF 1536: the size of a multilingual MiniLM; ``torch.manual_seed``),
  saved with ``save_pretrained`` together with the fast tokenizer into one
  folder. ``simalign.SentenceAligner(model=<folder>, token_type="word",
  matching_methods="mai", layer=k, device="cpu")`` and interlingua
  (``load_model(ModelSpec(path=<folder>))``) load the same weights. Random
  weights make the alignments linguistically meaningless; the equality check
  and the timings are still valid (the work per token is that of a trained
  model of this size).
- Pairs: eng-deu verse pairs of the packaged Bible: the first ``N - s`` verses
  plus the ``s`` verses of the whole Bible in which a side has at most 2 words
  (s = 4: "Job answered:", "Jesus wept.", "Rejoice always.", "Pray without
  ceasing."), so that simalign's short-sentence rule is exercised.
- Same inputs: each sentence is segmented with interlingua's ``segment``;
  simalign gets the word lists, interlingua gets ``" ".join(words)`` with
  ``words_a``/``words_b`` (spans in the joined text). Checked before timing:
  WordPiece tokens of the joined sentence == the concatenation of
  ``tokenizer.tokenize(word)`` (what simalign feeds), and interlingua's
  token-to-word map (character offsets) == simalign's word-to-sub-word map.
- Methods: simalign "a" (``inter``) = interlingua ``inter``/``argmax``, "i"
  (``itermax``) = ``itermax``, "m" (``mwmf``, networkx max-weight matching
  with maximum cardinality) = ``match`` (Hungarian). interlingua's itermax
  runs with ``short_sentence_inter=True`` (simalign's rule: plain inter when
  a side has <= 2 words); the default (False) is compared too.
- Timing: simalign is timed as a user calls it, one ``get_word_aligns`` per
  pair (it computes the three methods from one forward pass of the pair);
  interlingua as a user calls it for the same output: ``word_states`` for
  each side (length-sorted batches of 16) then ``align_states`` per method.
  Model loading is reported apart. ``--rounds R`` (default 1, for time:
  simalign's round alone takes ~15 min on the loaded 2-core machine) runs
  interleaved rounds (il, sa, then sa, il, ...), as the machine is shared;
  every round's links must equal the first's. To explain any difference, simalign's
  similarity matrices are recorded during its run (an instance attribute
  wraps ``get_similarity``: one list append per pair) and the link-drawing
  of both tools is also compared and timed on those identical matrices.

Part 2, the real offline aligner "in minutes on CPU" (a child process, so
its peak RSS is its own): ``align`` of the same pairs with the packaged
Gemma 3 270M at layer 11, itermax, then ``word_aligned_pool`` (every hidden
state) with SmolLM2-135M; wall seconds per stage and peak RSS.

Run (simalign is a benchmark-only dependency: ``pip install simalign`` in a
bench environment, or point ``--simalign-path`` / ``PYTHONPATH`` at an
unpacked wheel; part 1 is skipped without it)::

    pip download simalign==0.4 --no-deps -d /tmp/sa_dl
    unzip -q /tmp/sa_dl/simalign-0.4-py3-none-any.whl -d /tmp/sa_src
    PYTHONPATH=src python benchmarks/bench_alignment.py --simalign-path /tmp/sa_src   # ~70 min on 2 loaded cores
    PYTHONPATH=src python benchmarks/bench_alignment.py --quick --simalign-path /tmp/sa_src  # smoke run
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ENG, DEU = "eng_Latn", "deu_Latn"
# simalign's method names -> interlingua's
METHOD_NAMES = {"inter": "inter", "itermax": "itermax", "mwmf": "match"}


# ------------------------------------------------------------------ machine, pairs, encoder


def machine(threads: int) -> dict[str, Any]:
    import torch

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "torch_threads": threads,
        "python": platform.python_version(),
        "load_start": [round(x, 2) for x in os.getloadavg()],
    }
    from importlib.metadata import PackageNotFoundError, version

    for name in ("torch", "transformers", "tokenizers", "numpy", "scipy", "networkx", "scikit-learn", "simalign"):
        try:
            info[name] = version(name)
        except PackageNotFoundError:
            info[name] = None
    info["torch"] = torch.__version__
    try:
        info["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = None
    return info


def bible_pairs(n: int, short_max: int = 2) -> tuple[list[list[Any]], list[list[Any]], list[str], int]:
    """Word lists (interlingua ``Word``s of the original verses) of ``n`` eng-deu pairs: the
    first verses plus every verse where a side has at most ``short_max`` words; verse ids."""
    from interlingua.alignment import segment
    from interlingua.data.corpora import load_corpus

    corpus = load_corpus("bible", [ENG, DEU])
    eng, deu = corpus.sentences(ENG), corpus.sentences(DEU)
    ids = list(getattr(corpus, "ids", range(len(eng))))
    wa = [segment(s, ENG) for s in eng]
    wb = [segment(s, DEU) for s in deu]
    short = [i for i in range(len(eng)) if 0 < min(len(wa[i]), len(wb[i])) <= short_max]
    short = short[: max(0, n // 10)]  # a quick run keeps most of its pairs ordinary
    first = [i for i in range(len(eng)) if wa[i] and wb[i] and i not in set(short)][: n - len(short)]
    chosen = first + short
    return [wa[i] for i in chosen], [wb[i] for i in chosen], [str(ids[i]) for i in chosen], len(short)


def joined(words: Sequence[Any]) -> tuple[str, list[Any]]:
    """``" ".join`` of the word texts and the words re-spanned in that string."""
    from interlingua.alignment import Word

    out, pos = [], 0
    for w in words:
        out.append(Word(w.text, pos, pos + len(w.text)))
        pos += len(w.text) + 1
    return " ".join(w.text for w in words), out


def build_encoder(
    folder: Path, texts: Sequence[str], *, layers: int, hidden: int, heads: int, vocab: int, seed: int
) -> dict[str, Any]:
    """Train a cased WordPiece tokenizer on ``texts`` and save a seeded random BertModel with it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
        pad_token_id=fast.pad_token_id,
    )
    model = BertModel(cfg).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    weights = folder / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest() if weights.exists() else None
    return {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "ffn": 4 * hidden,
        "vocab": len(fast),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seed": seed,
        "weights_sha256": digest,
        "tokenizer_trained_on": f"{len(texts)} Bible verses (eng_Latn + deu_Latn)",
    }


def check_inputs(tokenizer: Any, words: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Joined-sentence tokenization == per-word tokenizations, and interlingua's token-to-word map
    (offsets) == simalign's word-to-sub-word map; counts of sentences where either fails."""
    from interlingua.alignment import token_word_map

    specials = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    bad_tokens = bad_map = empty_words = n_subwords = n_words = 0
    for ws in words:
        text, spans = joined(ws)
        per_word = [tokenizer.tokenize(w.text) for w in ws]
        empty_words += sum(1 for t in per_word if not t)
        enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        ids = enc["input_ids"]
        content = [t for t, i in zip(tokenizer.convert_ids_to_tokens(ids), ids) if i not in specials]
        if content != [t for tw in per_word for t in tw]:
            bad_tokens += 1
        ours = token_word_map(text, enc["offset_mapping"], spans, [i in specials for i in ids])
        theirs, pos = [], 1  # simalign: word i owns the next len(tokenize(word i)) positions after [CLS]
        for tw in per_word:
            theirs.append(list(range(pos, pos + len(tw))))
            pos += len(tw)
        if ours != theirs:
            bad_map += 1
        n_subwords += len(content)
        n_words += len(ws)
    return {
        "sentences": len(words),
        "tokenization_differs": bad_tokens,
        "word_map_differs": bad_map,
        "words_without_subwords": empty_words,
        "words": n_words,
        "subwords": n_subwords,
    }


# ------------------------------------------------------------------ part 1: the two tools


Links = dict[str, list[tuple[tuple[int, int], ...]]]  # method -> per pair, sorted (i, j)


def run_interlingua(
    loaded: Any, sents_a: list[str], sents_b: list[str], spans_a: list[list[Any]], spans_b: list[list[Any]], layer: int
) -> tuple[Links, float, Any]:
    from interlingua.alignment import AlignOptions, align_states, word_states

    t0 = time.perf_counter()
    sa = word_states(loaded, sents_a, spans_a, [layer])
    sb = word_states(loaded, sents_b, spans_b, [layer])
    t_states = time.perf_counter() - t0
    out = {}
    for method in ("inter", "itermax", "match"):
        res = align_states(sa, sb, spans_a, spans_b, options=AlignOptions(method=method, short_sentence_inter=True))
        out[method] = [al.links for al in res]
    return out, time.perf_counter() - t0, (sa, sb, t_states)


def run_simalign(
    aligner: Any, words_a: list[list[str]], words_b: list[list[str]]
) -> tuple[Links, float, list[np.ndarray]]:
    sims: list[np.ndarray] = []
    original = aligner.get_similarity

    def recording(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        s = original(x, y)
        sims.append(s)
        return s

    aligner.get_similarity = recording  # instance attribute shadows the staticmethod
    out: Links = {m: [] for m in METHOD_NAMES.values()}
    try:
        t0 = time.perf_counter()
        for wa, wb in zip(words_a, words_b):
            res = aligner.get_word_aligns(wa, wb)
            for theirs, ours in METHOD_NAMES.items():
                out[ours].append(tuple(sorted((int(i), int(j)) for i, j in res[theirs])))
        seconds = time.perf_counter() - t0
    finally:
        del aligner.get_similarity
    return out, seconds, sims


def compare_links(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> dict[str, list[int]]:
    return {m: [s for s, (x, y) in enumerate(zip(a[m], b[m])) if set(x) != set(y)] for m in a}


def link_drawing_on_identical_matrices(sims: list[np.ndarray], sa_links: dict[str, list[tuple]]) -> dict[str, Any]:
    """Both tools' link drawing on simalign's own similarity matrices: equality and time."""
    from simalign import SentenceAligner

    from interlingua.alignment import align_matrix

    res: dict[str, Any] = {}
    t0 = time.perf_counter()
    ours = {"inter": [], "itermax": [], "match": []}
    for s in sims:
        ours["inter"].append(align_matrix(s, "inter"))
        ours["itermax"].append(align_matrix(s, "itermax", short_sentence_inter=True))
        ours["match"].append(align_matrix(s, "match"))
    res["interlingua_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs: dict[str, list[set]] = {"inter": [], "itermax": [], "match": []}
    for s in sims:
        fwd, rev = SentenceAligner.get_alignment_matrix(s)
        for name, mat in (
            ("inter", fwd * rev),
            ("itermax", SentenceAligner.iter_max(s)),
            ("match", SentenceAligner.get_max_weight_match(s)),
        ):
            theirs[name].append({(int(i), int(j)) for i, j in zip(*np.nonzero(mat > 0))})
    res["simalign_seconds"] = time.perf_counter() - t0
    res["differ"] = {m: sum(1 for x, y in zip(ours[m], theirs[m]) if x != y) for m in ours}
    # and simalign's matrices reproduce simalign's end-to-end output (the recording is faithful)
    res["recorded_reproduce_simalign"] = all(
        theirs[m][s] == set(sa_links[m][s]) for m in ours for s in range(len(sims))
    )
    return res


def near_tie_report(s_ours: np.ndarray, s_theirs: np.ndarray) -> dict[str, float]:
    """Smallest gap between the two best entries of any row/column (where argmax ties can flip)."""

    def gap(s: np.ndarray, axis: int) -> float:
        if s.shape[axis] < 2:
            return float("inf")
        part = -np.sort(-s, axis=axis)
        top = np.take(part, 0, axis=axis) - np.take(part, 1, axis=axis)
        return float(top.min())

    return {
        "max_abs_sim_diff": float(np.abs(s_ours - s_theirs).max()),
        "min_top2_gap": min(gap(s_theirs, 0), gap(s_theirs, 1)),
    }


def part_simalign(
    args: argparse.Namespace, words_a: list[list[Any]], words_b: list[list[Any]], n_short: int
) -> dict[str, Any]:
    import torch
    from simalign import SentenceAligner

    from interlingua.alignment import align_matrix, similarity_matrix
    from interlingua.data.corpora import load_corpus
    from interlingua.data.models import ModelSpec, load_model

    result: dict[str, Any] = {}
    corpus = load_corpus("bible", [ENG, DEU])
    texts = list(corpus.sentences(ENG)) + list(corpus.sentences(DEU))
    folder = Path(args.model_dir) if args.model_dir else Path(tempfile.mkdtemp(prefix="bench_alignment_bert_"))
    t0 = time.perf_counter()
    result["encoder"] = build_encoder(
        folder, texts, layers=args.layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab, seed=args.seed
    )
    result["encoder"]["build_seconds"] = round(time.perf_counter() - t0, 2)
    result["encoder"]["layer"] = args.layer
    print(f"encoder: {result['encoder']}", flush=True)

    t0 = time.perf_counter()
    loaded = load_model(ModelSpec(path=str(folder)))
    load_il = time.perf_counter() - t0
    t0 = time.perf_counter()
    aligner = SentenceAligner(
        model=str(folder), token_type="word", matching_methods="mai", layer=args.layer, device="cpu"
    )
    load_sa = time.perf_counter() - t0
    torch.set_num_threads(args.threads)

    inputs = check_inputs(loaded.tokenizer, words_a + words_b)
    result["inputs"] = inputs
    print(f"inputs: {inputs}", flush=True)
    if inputs["tokenization_differs"] or inputs["word_map_differs"] or inputs["words_without_subwords"]:
        raise SystemExit("the two tools would not see the same sub-words; not timing")
    sents_a, spans_a = zip(*(joined(w) for w in words_a))
    sents_b, spans_b = zip(*(joined(w) for w in words_b))
    sents_a, sents_b, spans_a, spans_b = list(sents_a), list(sents_b), list(spans_a), list(spans_b)
    texts_a = [[w.text for w in ws] for ws in words_a]
    texts_b = [[w.text for w in ws] for ws in words_b]

    rounds: list[dict[str, Any]] = []
    il_out = sa_out = None
    sims: list[np.ndarray] = []
    states = None
    for r in range(args.rounds):
        order = ("interlingua", "simalign") if r % 2 == 0 else ("simalign", "interlingua")
        row: dict[str, Any] = {"order": list(order), "load_before": round(os.getloadavg()[0], 2)}
        for tool in order:
            gc.collect()
            if tool == "interlingua":
                out, secs, (sa, sb, t_states) = run_interlingua(loaded, sents_a, sents_b, spans_a, spans_b, args.layer)
                row["interlingua_seconds"] = round(secs, 3)
                row["interlingua_forward_seconds"] = round(t_states, 3)
                if il_out is not None and out != il_out:
                    raise SystemExit("interlingua's output changed between rounds")
                il_out, states = out, (sa, sb)
            else:
                out, secs, rec = run_simalign(aligner, texts_a, texts_b)
                row["simalign_seconds"] = round(secs, 3)
                if sa_out is not None and compare_links(out, sa_out) != {m: [] for m in out}:
                    raise SystemExit("simalign's output changed between rounds")
                sa_out, sims = out, rec
            print(f"round {r + 1}: {tool} {secs:.1f} s", flush=True)
        row["ratio_simalign_over_interlingua"] = round(row["simalign_seconds"] / row["interlingua_seconds"], 2)
        row["load_after"] = round(os.getloadavg()[0], 2)
        rounds.append(row)
    assert il_out is not None and sa_out is not None and states is not None

    differ = compare_links(il_out, sa_out)
    sa_states, sb_states = states
    sims_ours = [similarity_matrix(sa_states.vectors[s][0], sb_states.vectors[s][0]) for s in range(len(sims))]
    default_itermax = [tuple(sorted(align_matrix(s, "itermax"))) for s in sims_ours]
    differ_default = [s for s in range(len(sims)) if set(default_itermax[s]) != set(sa_out["itermax"][s])]
    shapes = [s.shape for s in sims_ours]
    details = []
    for m, idx in differ.items():
        for s in idx:
            rep = near_tie_report(sims_ours[s], sims[s])
            rep.update(
                {
                    "method": m,
                    "pair": s,
                    "shape": list(shapes[s]),
                    "interlingua": [list(x) for x in il_out[m][s]],
                    "simalign": [list(x) for x in sa_out[m][s]],
                }
            )
            details.append(rep)
    all_diff = [float(np.abs(a - b).max()) for a, b in zip(sims_ours, sims)]
    result["equality"] = {
        "pairs": len(sims),
        "pairs_with_a_side_of_at_most_2_words": n_short,
        "differ_per_method": {m: len(v) for m, v in differ.items()},
        "differences": details,
        "itermax_default_short_sentence_inter_false_differs": len(differ_default),
        "itermax_default_differs_only_where_min_words_is_2": all(min(shapes[s]) == 2 for s in differ_default),
        "itermax_default_differing_pairs": [{"pair": s, "shape": list(shapes[s])} for s in differ_default],
        "max_abs_similarity_difference": max(all_diff),
        "links_per_method": {m: sum(len(x) for x in v) for m, v in il_out.items()},
    }
    result["identical_matrices"] = link_drawing_on_identical_matrices(sims, sa_out)
    sa_secs = [r["simalign_seconds"] for r in rounds]
    il_secs = [r["interlingua_seconds"] for r in rounds]
    result["timing"] = {
        "rounds": rounds,
        "interlingua_best_seconds": min(il_secs),
        "simalign_best_seconds": min(sa_secs),
        "ratio_of_best": round(min(sa_secs) / min(il_secs), 2),
        "ratio_of_medians": round(float(np.median(sa_secs)) / float(np.median(il_secs)), 2),
        "load_model_seconds": {"interlingua": round(load_il, 2), "simalign": round(load_sa, 2)},
    }
    print(
        json.dumps({k: result[k] for k in ("equality", "identical_matrices", "timing")}, indent=1, default=str),
        flush=True,
    )
    return result


# ------------------------------------------------------------------ part 2: the real aligner


def part_real_child(args: argparse.Namespace) -> dict[str, Any]:
    """In a child process: align with Gemma 3 270M, pool with SmolLM2-135M; seconds and peak RSS."""
    import torch

    from interlingua.alignment import AlignOptions, align, word_aligned_pool
    from interlingua.data.models import ModelSpec, load_model

    torch.set_num_threads(args.threads)
    words_a, words_b, ids, n_short = bible_pairs(args.pairs)
    # the verses themselves (not re-joined): the real aligner segments its own input
    from interlingua.data.corpora import load_corpus

    corpus = load_corpus("bible", [ENG, DEU])
    index = {str(v): i for i, v in enumerate(getattr(corpus, "ids", range(len(corpus.sentences(ENG)))))}
    eng, deu = corpus.sentences(ENG), corpus.sentences(DEU)
    sents_a = [eng[index[v]] for v in ids]
    sents_b = [deu[index[v]] for v in ids]

    def rss_mib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    out: dict[str, Any] = {"pairs": len(ids), "rss_mib_before_models": round(rss_mib(), 1)}
    t_all = time.perf_counter()
    t0 = time.perf_counter()
    enc = load_model(ModelSpec(package=args.real_encoder))
    out["encoder"] = {
        "package": args.real_encoder,
        "layer": args.real_layer,
        "method": "itermax",
        "n_hidden_states": int(enc.n_hidden_states),
        "load_seconds": round(time.perf_counter() - t0, 2),
    }
    t0 = time.perf_counter()
    alignments = align(
        enc,
        sents_a,
        sents_b,
        language_a=ENG,
        language_b=DEU,
        options=AlignOptions(layer=args.real_layer, method="itermax"),
    )
    out["encoder"]["align_seconds"] = round(time.perf_counter() - t0, 2)
    out["encoder"]["links"] = sum(len(a.links) for a in alignments)
    out["encoder"]["words_a"] = sum(len(a.words_a) for a in alignments)
    out["encoder"]["words_b"] = sum(len(a.words_b) for a in alignments)
    out["encoder"]["peak_rss_mib_after_align"] = round(rss_mib(), 1)
    del enc
    gc.collect()
    t0 = time.perf_counter()
    pool_model = load_model(ModelSpec(package=args.pool_model))
    out["pooling"] = {
        "package": args.pool_model,
        "n_hidden_states": int(pool_model.n_hidden_states),
        "load_seconds": round(time.perf_counter() - t0, 2),
    }
    t0 = time.perf_counter()
    pooled = word_aligned_pool(pool_model, sents_a, sents_b, alignments)
    out["pooling"]["pool_seconds"] = round(time.perf_counter() - t0, 2)
    out["pooling"]["rows"] = len(pooled.rows)
    out["pooling"]["n_dropped"] = int(pooled.n_dropped)
    out["pooling"]["reps_shape"] = list(pooled.reps_a.shape)
    out["total_seconds"] = round(time.perf_counter() - t_all, 2)
    out["peak_rss_mib"] = round(rss_mib(), 1)
    return out


def part_real(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "real.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child-real",
            str(target),
            "--pairs",
            str(args.pairs),
            "--threads",
            str(args.threads),
            "--real-encoder",
            args.real_encoder,
            "--real-layer",
            str(args.real_layer),
            "--pool-model",
            args.pool_model,
        ]
        load0 = [round(x, 2) for x in os.getloadavg()]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        out = json.loads(target.read_text())
        out["process_wall_seconds"] = round(time.perf_counter() - t0, 2)
        out["load_before"], out["load_after"] = load0, [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=1), flush=True)
    return out


# ------------------------------------------------------------------ report


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        "# Word alignment: interlingua vs simalign 0.4, and the offline aligner on CPU",
        "",
        f"Machine: {m['cpus']} CPUs ({m['cpu']}), torch {m['torch']} with {m['torch_threads']} threads, "
        f"transformers {m['transformers']}, networkx {m['networkx']}, simalign {m.get('simalign')}; "
        f"load average {m['load_start']} at the start, {m.get('load_end')} at the end (1/5/15 min; the cores "
        f"were shared with other people's jobs). Code: commit {m.get('commit')} plus this benchmark.",
        "",
    ]
    if "simalign" in res:
        s = res["simalign"]
        e, eq, t, im = s["encoder"], s["equality"], s["timing"], s["identical_matrices"]
        lines += [
            "## Same encoder, same pairs, same methods",
            "",
            f"Encoder: random BertModel ({e['layers']} layers, hidden {e['hidden']}, {e['heads']} heads, "
            f"FF {e['ffn']}, "
            f"{e['parameters'] / 1e6:.1f} M parameters, seed {e['seed']}), cased WordPiece vocabulary of {e['vocab']} "
            f"trained on {e['tokenizer_trained_on']}; hidden state {e['layer']} (0 = embeddings). Random weights: "
            "the links mean nothing linguistically, the equality check and the timings are valid.",
            "",
            f"Inputs: {eq['pairs']} eng-deu Bible verse pairs ({eq['pairs_with_a_side_of_at_most_2_words']} with a "
            f"side of at most 2 words); {s['inputs']['words']} words, {s['inputs']['subwords']} sub-words. Joined-"
            f"sentence tokenization differs from per-word tokenization in {s['inputs']['tokenization_differs']} "
            f"sentences; the token-to-word maps differ in {s['inputs']['word_map_differs']}.",
            "",
            "| method (interlingua / simalign) | links | pairs whose link sets differ | on simalign's own matrices |",
            "|---|---:|---:|---:|",
        ]
        for ours, theirs in (("inter", "a: inter"), ("itermax", "i: itermax"), ("match", "m: mwmf")):
            lines.append(
                f"| {ours} / {theirs} | {eq['links_per_method'][ours]} | {eq['differ_per_method'][ours]} "
                f"of {eq['pairs']} | {im['differ'][ours]} |"
            )
        n_def = eq["itermax_default_short_sentence_inter_false_differs"]
        lines += [
            "",
            "- interlingua's itermax ran with `short_sentence_inter=True` (simalign's rule: plain inter when "
            "a side has <= 2 words). With the default (False): "
            + (
                f"{n_def} pairs differ, all with a 2-word side: "
                f"{eq['itermax_default_differs_only_where_min_words_is_2']} "
                f"({eq['itermax_default_differing_pairs']})."
                if n_def
                else f"0 pairs differ: in these {eq['pairs_with_a_side_of_at_most_2_words']} short pairs the "
                "second round adds no link "
                "(tests/alignment/test_simalign.py has a 2 x 3 matrix where the rule changes the links)."
            ),
            f"- Largest difference between the two tools' similarity matrices: "
            f"{eq['max_abs_similarity_difference']:.2e}.",
        ]
        for d in eq["differences"]:
            lines.append(
                f"- pair {d['pair']} ({d['method']}, {d['shape'][0]} x {d['shape'][1]}): interlingua "
                f"{d['interlingua']}, simalign {d['simalign']}; max |dS| {d['max_abs_sim_diff']:.1e}, "
                f"smallest top-2 gap in simalign's matrix {d['min_top2_gap']:.1e}."
            )
        lines += [
            "",
            "| round | order | interlingua (s) | of which forward (s) | simalign (s) | simalign / interlingua |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for i, r in enumerate(t["rounds"]):
            lines.append(
                f"| {i + 1} | {' then '.join(r['order'])} | {r['interlingua_seconds']:.1f} | "
                f"{r['interlingua_forward_seconds']:.1f} | {r['simalign_seconds']:.1f} | "
                f"{r['ratio_simalign_over_interlingua']:.2f} |"
            )
        lines += [
            "",
            f"Best: interlingua {t['interlingua_best_seconds']:.1f} s, simalign "
            f"{t['simalign_best_seconds']:.1f} s, ratio {t['ratio_of_best']:.2f} (of medians "
            f"{t['ratio_of_medians']:.2f}). Model loading (not in the times): interlingua "
            f"{t['load_model_seconds']['interlingua']:.1f} s, "
            f"simalign {t['load_model_seconds']['simalign']:.1f} s.",
            f"Link drawing alone on simalign's {eq['pairs']} matrices (inter + itermax + match): interlingua "
            f"{im['interlingua_seconds']:.2f} s, simalign {im['simalign_seconds']:.2f} s.",
            "",
        ]
    if "real" in res:
        r = res["real"]
        enc, pool = r["encoder"], r["pooling"]
        lines += [
            "## The offline aligner in minutes on CPU",
            "",
            f"{r['pairs']} eng-deu Bible pairs (the same verses), one child process, load average "
            f"{r['load_before']} before, {r['load_after']} after.",
            "",
            "| stage | model | wall (s) |",
            "|---|---|---:|",
            f"| load | {enc['package']} | {enc['load_seconds']:.1f} |",
            f"| align (layer {enc['layer']}, {enc['method']}; {enc['words_a']} + {enc['words_b']} words, "
            f"{enc['links']} links) | {enc['package']} | {enc['align_seconds']:.1f} |",
            f"| load | {pool['package']} | {pool['load_seconds']:.1f} |",
            f"| word_aligned_pool ({pool['rows']} rows x {pool['n_hidden_states']} states, "
            f"{pool['n_dropped']} dropped) | {pool['package']} | {pool['pool_seconds']:.1f} |",
            f"| total | | {r['total_seconds']:.1f} |",
            "",
            f"Peak RSS: {enc['peak_rss_mib_after_align']:.0f} MiB after alignment, {r['peak_rss_mib']:.0f} MiB "
            "for the whole process.",
            "",
        ]
    for note in res.get("notes", []):
        lines += [f"Note: {note}", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=500)
    p.add_argument("--simalign-path", default=None, help="folder holding the simalign package (an unpacked wheel)")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=16000)
    p.add_argument("--layer", type=int, default=8, help="hidden state to align at (simalign's default: 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=1, help="interleaved rounds (il, sa, then sa, il, ...)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model-dir", default=None, help="where to save the built encoder (default: a temp folder)")
    p.add_argument("--real-encoder", default="gemma3-270m")
    p.add_argument("--real-layer", type=int, default=11)
    p.add_argument("--pool-model", default="smollm2-135m")
    p.add_argument("--skip-simalign", action="store_true")
    p.add_argument("--skip-real", action="store_true")
    p.add_argument("--quick", action="store_true", help="40 pairs, a 4-layer encoder, 1 round")
    p.add_argument("--out", default=str(RESULTS / "alignment.json"))
    p.add_argument("--render", default=None, metavar="JSON", help="only rewrite the .md next to this results file")
    p.add_argument("--child-real", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.render:
        src = Path(args.render)
        src.with_suffix(".md").write_text(markdown(json.loads(src.read_text())))
        return
    if args.simalign_path:
        sys.path.insert(0, str(Path(args.simalign_path).resolve()))
    if args.child_real:
        Path(args.child_real).write_text(json.dumps(part_real_child(args)))
        return
    if args.quick:
        args.pairs, args.layers, args.hidden, args.heads = 40, 4, 128, 4
        args.layer, args.rounds, args.vocab = 2, 1, 4000
        if args.out == str(RESULTS / "alignment.json"):
            args.out = str(Path(tempfile.gettempdir()) / "alignment_quick.json")
    import torch

    torch.set_num_threads(args.threads)
    res: dict[str, Any] = {"machine": machine(args.threads), "args": vars(args)}
    if not args.skip_simalign:
        try:
            import simalign  # noqa: F401
        except ImportError:
            print("simalign is not installed (pip install simalign, or --simalign-path): skipping part 1")
        else:
            words_a, words_b, ids, n_short = bible_pairs(args.pairs)
            res["verses"] = ids
            res["simalign"] = part_simalign(args, words_a, words_b, n_short)
            write(res, args.out)  # part 1 is kept even if part 2 is interrupted
    if not args.skip_real:
        res["real"] = part_real(args)
    write(res, args.out)


def write(res: dict[str, Any], path: str) -> None:
    res["machine"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str) + "\n")
    out.with_suffix(".md").write_text(markdown(res))
    print(f"wrote {out} and {out.with_suffix('.md')}", flush=True)


if __name__ == "__main__":
    main()
