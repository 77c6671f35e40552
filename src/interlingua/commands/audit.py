"""``interlingua audit SPEC...``: audit adapters, tokenizers, quality and identity of models; audit.csv/.parquet.

The lead registers it in ``interlingua.cli``: ``add_audit_parser(sub)`` next to
the other sub-commands and ``if args.command == "audit": return run_audit(args)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from interlingua.core.argtypes import float_in, int_in
from interlingua.core.errors import ConfigError, InterlinguaError

if TYPE_CHECKING:
    from interlingua.data.models.spec import ModelSpec

__all__ = ["add_audit_parser", "run_audit", "parse_spec", "main"]

_SPECS = (
    "SPEC: a local model folder (save_pretrained), zoo:NAME (a piece of the miniature family, e.g. zoo:eng, "
    "zoo:eng+deu-lora, zoo:eng+deu-lora-identity, zoo:eng@step0) or package:NAME (gemma3-270m, smollm2-135m). "
    "Exit status: 0; 1 with --strict when any row is bad; 2 for bad input."
)


def parse_spec(text: str) -> ModelSpec:
    """``zoo:NAME``, ``package:NAME`` or a local folder -> :class:`ModelSpec`; ConfigError otherwise."""
    from pydantic import ValidationError

    from interlingua.data.models.spec import ModelSpec

    try:
        if text.startswith("zoo:"):
            return ModelSpec(zoo=text[4:])
        if text.startswith("package:"):
            return ModelSpec.model_validate({"package": text[8:]})  # any text: pydantic checks the name
    except ValidationError as exc:
        raise ConfigError(f"model spec {text!r}: {exc.errors()[0]['msg']}") from exc
    if not Path(text).expanduser().is_dir():
        raise ConfigError(f"model spec {text!r} is not a folder; give a local model folder, zoo:NAME or package:NAME")
    return ModelSpec(path=text)


def add_audit_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``audit`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "audit",
        help="audit models: adapters (identity LoRA?), tokenizers (mismatched?), NLL vs chance, identical models",
        description="Audit models before comparing them; writes OUT/audit.csv, OUT/audit.parquet and "
        "OUT/manifest.json (OUT is checked like a run's folder: nothing interlingua did not write is replaced).",
        epilog=_SPECS,
    )
    p.add_argument("specs", nargs="*", metavar="SPEC")
    p.add_argument(
        "--config",
        metavar="RUN.yaml",
        help="audit the models of a run config (with their `tokenizer:`, "
        "`adapter:` and tokenwise merges; NLL on its audit.language side unless --sentences/--bible)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="read every SPEC with this tokenizer (a folder or zoo:NAME): "
        "how a checkpoint shipped with another tokenizer behaves",
    )
    p.add_argument("--zoo-root", help="store root holding the zoo (default: --cache-dir)")
    p.add_argument("--cache-dir", help="store root (default $INTERLINGUA_CACHE or ~/.cache/interlingua)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--sentences", metavar="FILE", help="text file, one sentence a line: measure each model's NLL")
    src.add_argument("--bible", metavar="LANG", help="measure NLL on N verses of this Bible language")
    p.add_argument("--n", type=int_in(1, 10**7), default=100, help="verses drawn with --bible (seed 0; default 100)")
    p.add_argument("--reference", metavar="DIR", help="reference tokenizer folder (default: the adapter's base)")
    p.add_argument(
        "--tiny-threshold", type=float_in(0, 1e300), default=1e-6, help="max|scaling*B@A| below this is 'tiny'"
    )
    p.add_argument(
        "--min-agreement", type=float_in(0, 1), default=0.99, help="id agreement below this is 'mismatched tokenizer'"
    )
    p.add_argument(
        "--margin", type=float_in(0, 1e300), default=0.5, help="NLL within this of ln V is 'not a language model'"
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when any row is bad")
    p.add_argument(
        "-o",
        "--output",
        default="interlingua-audit",
        metavar="OUT",
        help="output folder: new, empty, or an earlier audit's (its manifest.json proves it); "
        "default ./interlingua-audit",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier audit's files in OUT even when "
        "files were added next to them (files interlingua did not write are never touched)",
    )
    return p


def _sentences(args: argparse.Namespace) -> list[str] | None:
    if args.sentences:
        path = Path(args.sentences).expanduser()
        try:
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--sentences {path}: cannot read it ({exc}); give a UTF-8 text file") from exc
        lines = [line for line in lines if line]
        if not lines:
            raise ConfigError(f"--sentences {path} has no non-empty line")
        return lines
    if args.bible:
        if args.n < 1:
            raise ConfigError(f"--n must be >= 1, got {args.n}")
        from interlingua.data.corpora import load_corpus, normalize_language

        lang = normalize_language(args.bible)
        corpus = load_corpus("bible", [lang])
        return corpus.sample(min(args.n, len(corpus)), seed=0).sentences(lang)
    return None


def _write(frame, target) -> list[Path]:
    """audit.csv and audit.parquet into the checked output folder (:mod:`interlingua.core.outputs`: with a manifest)."""
    from interlingua.core.outputs import write_outputs

    def build(tmp: Path) -> None:
        frame.to_csv(tmp / "audit.csv", index=False)
        frame.to_parquet(tmp / "audit.parquet", index=False)

    write_outputs(target, build)
    return [target.path / "audit.csv", target.path / "audit.parquet"]


def run_audit(args: argparse.Namespace) -> int:
    """Run a parsed ``audit`` command; 0, 1 (--strict and a bad row) or 2 (bad input, one-line message)."""
    import pandas as pd

    from interlingua.audit.core import audit
    from interlingua.core.outputs import prepare_output

    try:
        target = prepare_output(args.output, overwrite=getattr(args, "overwrite", False))  # before any work
        specs = [parse_spec(s) for s in args.specs]
        if args.tokenizer:
            specs = [s.model_copy(update={"tokenizer": args.tokenizer}) for s in specs]
        sentences = _sentences(args)
        if args.config:
            from interlingua.pipeline.config import load_spec
            from interlingua.pipeline.preflight import load_run_corpus

            run_spec = load_spec(args.config)
            specs += list(run_spec.models)
            from interlingua.audit.capability import audit_options

            section = audit_options(run_spec)
            if sentences is None and section is not None and section.quality:
                from interlingua.data.corpora import normalize_language

                lang = normalize_language(section.language or run_spec.corpus.languages[0])
                sentences = load_run_corpus(run_spec).sentences(lang)
            args.cache_dir = args.cache_dir or run_spec.cache_dir
        if not specs:
            raise ConfigError("nothing to audit: give model SPECs or --config RUN.yaml")
        frame = audit(
            specs,
            corpus_sentences=sentences,
            reference=args.reference,
            cache_dir=args.cache_dir,
            zoo_root=args.zoo_root,
            tiny_threshold=args.tiny_threshold,
            min_agreement=args.min_agreement,
            margin=args.margin,
        )
        paths = _write(frame, target)
    except (InterlinguaError, ValueError) as err:
        print(f"interlingua: error: {err}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_colwidth", 60, "display.float_format", "{:.4g}".format):
        from interlingua.audit.core import SUMMARY_COLUMNS

        print(frame[list(SUMMARY_COLUMNS)].to_string(index=False))
    for _, row in frame[frame["bad"]].iterrows():
        reasons = [r for r in (row["adapter_reason"], row["tokenizer_reason"], row["quality_reason"]) if r]
        print(f"\n{row['model']}: {row['verdict']}\n  " + "\n  ".join(reasons))
    print(f"\nwrote {', '.join(str(p) for p in paths)}")
    return 1 if args.strict and bool(frame["bad"].any()) else 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m interlingua.commands.audit SPEC...``) until the lead registers it."""
    parser = argparse.ArgumentParser(prog="interlingua")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    return run_audit(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
