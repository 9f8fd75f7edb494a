"""The ``cotrain`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cotrain`` console script.

    Examples
    --------
    >>> main(["--version"])  # doctest: +SKIP
    """
    from cotrain import __version__

    parser = argparse.ArgumentParser(prog="cotrain", description=__doc__)
    parser.add_argument("--version", action="version", version=f"cotrain {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="mixed-model federated co-training on bundled breast-cancer data"
    )
    demo.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    demo.add_argument("--rounds", type=int, default=10, help="rounds per run (default 10)")
    demo.add_argument("--n-jobs", type=int, default=None, help="joblib workers for clients")
    demo.add_argument("--plot", metavar="FILE", help="save the convergence plot (PNG/PDF)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    run = sub.add_parser("run", help="run an experiment file (TOML) and write a results folder")
    run.add_argument("experiment", help="the experiment file, e.g. experiments/table3.toml")
    run.add_argument("--out", help="results folder (default results/<name>)")
    run.add_argument(
        "--resume", action="store_true", help="keep finished runs, continue interrupted ones"
    )
    run.add_argument("--quiet", action="store_true", help="no progress output")
    rep = sub.add_parser("report", help="tabulate results folders side by side (Markdown)")
    rep.add_argument("folders", nargs="+", help="results folders written by `cotrain run`")
    site = sub.add_parser("site", help="a Flower site's services").add_subparsers(
        dest="site_command", required=True
    )
    serve = site.add_parser("serve", help="run the site's warm worker (docs/deployment.md)")
    serve.add_argument("site", help="the site's site.toml (or its folder)")
    serve.add_argument("--socket", help="Unix socket path (default: <site folder>/worker.sock)")
    args = parser.parse_args(argv)
    if args.command == "site":
        from cotrain.flower.worker import main as serve_site

        return serve_site([args.site] + (["--socket", args.socket] if args.socket else []))
    if args.command in ("run", "report"):
        from cotrain.experiment import ExperimentError, report, run_experiment

        try:
            if args.command == "run":
                folder = run_experiment(
                    args.experiment, args.out, resume=args.resume, verbose=0 if args.quiet else 1
                )
                print((folder / "summary.md").read_text())
                print(f"results: {folder}")
            else:
                print(report(args.folders))
        except ExperimentError as err:
            print(f"cotrain {args.command}: {err}", file=sys.stderr)
            return 2
        return 0
    if args.command == "demo":
        from cotrain.demo import run_demo

        if args.seeds < 1 or args.rounds < 1:
            parser.error("--seeds and --rounds must be >= 1")
        run_demo(
            seeds=args.seeds,
            rounds=args.rounds,
            n_jobs=args.n_jobs,
            plot=args.plot,
            verbose=0 if args.quiet else 1,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
