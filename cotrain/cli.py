"""The cotrain command line: the demo, experiment files, reports, Flower site services."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

DESCRIPTION = (
    "Federated co-training (FedCT): clients share predicted labels on a public pool "
    "instead of model weights. Run 'cotrain COMMAND --help' for a command's options."
)


class Parser(argparse.ArgumentParser):
    """An argument parser whose "invalid choice" errors suggest the closest choice.

    Examples
    --------
    >>> import contextlib, io
    >>> parser = Parser(prog="x")
    >>> _ = parser.add_argument("command", choices=["demo", "run"])
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
    ...     _ = parser.parse_args(["dmeo"])
    >>> err.getvalue().splitlines()[-1].endswith("; did you mean 'demo'?")
    True
    """

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` (with a suggestion for a mistyped choice); exit 2."""
        from cotrain.params import did_you_mean

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            listed = re.findall(r"'([^']*)'", found[2]) or found[2].split(", ")
            message += did_you_mean(found[1], listed)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``cotrain`` argument parser, with its subcommands (every option has a help text).

    Examples
    --------
    >>> parser = build_parser()
    >>> parser.parse_args(["run", "exp.toml", "--variant", "a", "--seeds", "0,1"]).seeds
    [0, 1]
    """
    from cotrain import __version__

    parser = Parser(prog="cotrain", description=DESCRIPTION)
    parser.add_argument(
        "--version", action="version", version=f"cotrain {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="one of these commands:"
    )
    demo = sub.add_parser(
        "demo",
        help="mixed-model federated co-training on bundled breast-cancer data",
        description="FedCT with mixed learners (DT, RF, naive Bayes, XGBoost, RF) on "
        "breast-cancer data, against local-only and centralised training; prints a "
        "comparison table (about 20 s on 2 cores). --full runs the FedCT paper's federation "
        "(RuleFit in place of naive Bayes; about 2.5 minutes). Every option is checked before "
        "anything runs (exit status 2).",
    )
    demo.add_argument(
        "--full",
        action="store_true",
        help="the FedCT paper's federation: DT, RF, RuleFit, XGBoost, RF (Table 6; about 2.5 "
        "minutes on 2 cores)",
    )
    demo.add_argument(
        "--seeds", type=_positive_int, default=5, metavar="N", help="number of seeds (default 5)"
    )
    demo.add_argument(
        "--rounds", type=_positive_int, default=10, metavar="N", help="rounds per run (default 10)"
    )
    demo.add_argument(
        "--n-jobs",
        type=_n_jobs,
        default=None,
        metavar="N",
        help="parallel workers for the clients (joblib; -1: all cores)",
    )
    demo.add_argument(
        "--plot",
        metavar="FILE",
        type=_plot_file,
        help="save the convergence plot (an image format: .png, .pdf, .svg, ...)",
    )
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(subparser=demo)
    run = sub.add_parser(
        "run",
        help="run an experiment file (TOML) and write a results folder",
        description="Run every variant and seed of an experiment file. The whole file is "
        "checked first; an error names the file, the line and the reason, and nothing "
        "is written (exit status 2).",
    )
    run.add_argument("experiment", help="the experiment file, e.g. experiments/table3.toml")
    run.add_argument(
        "--out",
        metavar="DIR",
        type=_out_folder,
        help="results folder, made if missing (default results/<name>)",
    )
    run.add_argument(
        "--resume", action="store_true", help="keep finished runs, continue interrupted ones"
    )
    run.add_argument(
        "--variant",
        action="append",
        metavar="LABEL",
        help="run only this variant (its label in the file); repeat for several",
    )
    run.add_argument(
        "--seeds",
        type=_seed_list,
        metavar="S,S,...",
        help="run only these seeds, e.g. --seeds 0,1 (of those the file gives)",
    )
    run.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="keep each finished FedCT run's last checkpoint (to add rounds later); by "
        "default a finished run keeps only history.csv and result.json",
    )
    run.add_argument("--quiet", action="store_true", help="no progress output")
    run.add_argument(
        "--traceback", action="store_true", help="show the full traceback of a failed run"
    )
    rep = sub.add_parser(
        "report",
        help="results side by side: one Markdown table, a column per source",
        description="Print one Markdown table of results: a row per variant, a column per "
        "source (mean ± std accuracy over the seeds), a difference column for two sources, "
        "and the paper's number.",
    )
    rep.add_argument(
        "folders",
        nargs="+",
        help="results folders written by 'cotrain run', or results tables such as "
        "docs/results/<name>.md",
    )
    site = sub.add_parser(
        "site",
        help="a Flower site's services",
        description="Services of a Flower deployment site (see docs/deployment.md).",
    ).add_subparsers(
        dest="site_command", required=True, metavar="SERVICE", help="one of these services:"
    )
    serve = site.add_parser(
        "serve",
        help="run the site's warm worker (docs/deployment.md)",
        description="Run the site's warm worker, which keeps its clients' models loaded.",
    )
    serve.add_argument("site", help="the site's site.toml (or its folder)")
    serve.add_argument(
        "--socket", metavar="PATH", help="Unix socket path (default: <site folder>/worker.sock)"
    )
    node = site.add_parser(
        "node",
        help="run the site's warm worker and its Flower SuperNode, stopped together",
        description="Run the site's warm worker, then its SuperNode (flower-supernode, with "
        "the other arguments, e.g. --superlink HOST:PORT --insecure), each task process "
        "given --start-limit seconds to start. Ctrl-C, SIGTERM or 'cotrain stop SITE' stop "
        "every process it started (docs/deployment.md).",
    )
    node.add_argument("site", help="the site's site.toml (or its folder)")
    node.add_argument("--no-worker", action="store_true", help="no warm worker (slower rounds)")
    _start_limit_option(node)
    link = sub.add_parser(
        "superlink",
        help="run a Flower SuperLink, stopped with everything it started",
        description="Run flower-superlink with the other arguments (e.g. --insecure --port "
        "9000), each task process given --start-limit seconds to start. Ctrl-C, SIGTERM or "
        "'cotrain stop superlink.pid' stop every process it started (docs/deployment.md).",
    )
    _start_limit_option(link)
    link.add_argument(
        "--pid-file", default="superlink.pid", metavar="PATH",
        help="where to write its process id, for 'cotrain stop' (default: superlink.pid)",
    )  # fmt: skip
    stop = sub.add_parser(
        "stop",
        help="stop a 'cotrain site node' or 'cotrain superlink' and all it started",
        description="Stop a 'cotrain site node' (give the site) or 'cotrain superlink' (give "
        "its pid file) with every process it started.",
    )
    stop.add_argument("targets", nargs="+", help="site folders, site.toml files or pid files")
    return parser


def _start_limit_option(parser: argparse.ArgumentParser) -> None:
    from cotrain.flower.local.task_start import DEFAULT_START_LIMIT

    parser.add_argument(
        "--start-limit", type=float, default=DEFAULT_START_LIMIT, metavar="SECONDS",
        help=f"seconds each Flower task process may take to start (default "
        f"{DEFAULT_START_LIMIT:g}; Flower's own: 30)",
    )  # fmt: skip


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, e.g. 0,1, got {text!r}"
        ) from None
    if not seeds:
        raise argparse.ArgumentTypeError("expected at least one seed, e.g. 0,1")
    return seeds


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _n_jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer (1, 2, ... workers; -1: all cores), got {text!r}"
        ) from None
    if value == 0:
        raise argparse.ArgumentTypeError(
            "must be a number of workers (1, 2, ...) or -1 for all cores, got 0"
        )
    return value


def _plot_file(text: str) -> str:
    from cotrain.experiment.paths import check_plot_file

    try:
        check_plot_file(text, "")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).strip()) from None
    return text


def _out_folder(text: str) -> str:
    from cotrain.experiment.paths import check_output_folder

    try:
        check_output_folder(text, "")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).strip()) from None
    return text


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cotrain`` console script; returns the exit status.

    0: done; 2: a user error (an invalid experiment file, unknown variant, ...), printed
    as one line without a traceback; 1: a run that failed while training.

    Examples
    --------
    >>> main(["--version"])  # doctest: +SKIP
    """
    parser = build_parser()
    args, flower_args = parser.parse_known_args(argv)
    takes_flower_args = args.command == "superlink" or getattr(args, "site_command", "") == "node"
    if flower_args and not takes_flower_args:  # the rest go to Flower's own command
        parser.error(f"unrecognized arguments: {' '.join(flower_args)}")
    if args.command in ("site", "superlink", "stop"):
        return _flower_command(args, flower_args)
    if args.command in ("run", "report"):
        return _experiment_command(args)
    if args.command == "demo":
        from cotrain.demo import DEMO, PAPER_DEMO, check_extras, run_demo

        try:
            check_extras(PAPER_DEMO if args.full else DEMO)
        except ImportError as err:
            args.subparser.error(str(err))
        run_demo(
            seeds=args.seeds,
            rounds=args.rounds,
            n_jobs=args.n_jobs,
            plot=args.plot,
            verbose=0 if args.quiet else 1,
            full=args.full,
        )
    return 0


def _flower_command(args: Any, flower_args: list[str]) -> int:
    """``cotrain site serve|node``, ``cotrain superlink`` and ``cotrain stop``."""
    if args.command == "stop":
        from cotrain.flower.local.service import stop

        status = 0
        for target in args.targets:
            try:
                print(stop(target))
            except (ProcessLookupError, TimeoutError) as err:
                print(f"cotrain stop: {err}", file=sys.stderr)
                status = 1
        return status
    if args.command == "site" and args.site_command == "serve":
        from cotrain.flower.worker import main as serve_site

        return serve_site([args.site] + (["--socket", args.socket] if args.socket else []))
    from cotrain.flower.local.service import run_node, run_superlink
    from cotrain.flower.local.task_start import check_start_limit

    try:
        check_start_limit(args.start_limit)
        if args.command == "superlink":
            return run_superlink(
                flower_args, start_limit=args.start_limit, pid_file=Path(args.pid_file)
            )
        return run_node(
            args.site, flower_args, start_limit=args.start_limit, worker=not args.no_worker
        )
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"cotrain {args.command}: {err}", file=sys.stderr)
        return 2


def _experiment_command(args: Any) -> int:
    from cotrain.experiment import (
        ExperimentError,
        ExperimentWarning,
        RunFailed,
        report,
        run_experiment,
    )

    prefix = f"cotrain {args.command}"
    shown = warnings.showwarning

    said: set[str] = set()

    def show(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
        if issubclass(category, UserWarning):  # ExperimentWarning is one
            # one line, as the runner's own warnings, not a source line for a user to
            # read; once per command, not once per variant and seed
            if str(message) not in said:
                said.add(str(message))
                print(f"{prefix}: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest, **kw)

    with warnings.catch_warnings():
        warnings.showwarning = show
        warnings.simplefilter("always", ExperimentWarning)
        try:
            if args.command == "run":
                folder = run_experiment(
                    args.experiment,
                    args.out,
                    resume=args.resume,
                    verbose=0 if args.quiet else 1,
                    variants=args.variant,
                    seeds=args.seeds,
                    keep_checkpoints=args.keep_checkpoints,
                )
                print((folder / "summary.md").read_text())
                print(f"results: {folder}")
            else:
                print(report(args.folders))
        except RunFailed as err:
            if getattr(args, "traceback", False):
                raise
            print(f"{prefix}: {err} (--traceback shows where)", file=sys.stderr)
            return 1
        except ExperimentError as err:
            print(f"{prefix}: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            if args.command != "run":
                raise
            print(f"{prefix}: interrupted; {resume_hint(args)}", file=sys.stderr)
            return 130
    return 0


def resume_hint(args: Any) -> str:
    """One line saying how to continue an interrupted ``cotrain run``.

    Examples
    --------
    >>> from argparse import Namespace
    >>> resume_hint(Namespace(experiment="exp.toml", out=None, variant=None, seeds=None))
    'finished runs and checkpoints are kept; continue with: cotrain run exp.toml --resume'
    >>> hint = resume_hint(Namespace(experiment="x.toml", out="res", variant=["a b"], seeds=[0, 2]))
    >>> hint.split(": ")[1]
    "cotrain run x.toml --out res --variant 'a b' --seeds 0,2 --resume"
    """
    words = ["cotrain", "run", str(args.experiment)]
    if args.out is not None:
        words += ["--out", str(args.out)]
    for label in args.variant or ():
        words += ["--variant", label]
    if args.seeds:
        words += ["--seeds", ",".join(str(s) for s in args.seeds)]
    command = shlex.join([*words, "--resume"])
    return f"finished runs and checkpoints are kept; continue with: {command}"


if __name__ == "__main__":
    sys.exit(main())
