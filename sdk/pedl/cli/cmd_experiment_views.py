"""`det e describe|list-trials|list-checkpoints|download`: an experiment's trials, metrics and
checkpoints, as tables, --json or --csv (all through pedl.records)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pedl import records
from pedl._metrics import from_struct
from pedl.cli import output, render
from pedl.cli.arguments import positive_int
from pedl.cli.client import SchedulerClient, connect
from pedl.cli.errors import EXIT_BAD_INPUT, CliError
from pedl.v1 import common_pb2, scheduler_pb2

if TYPE_CHECKING:
    from pedl import importance


def id_list(text: str) -> list[int]:
    """`1,2,3` as Determined's `describe` takes it."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected experiment ids like 1,2, got {text!r}")
    return [positive_int(p) for p in parts]


def register(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    describe = commands.add_parser("describe", parents=[common], help="show experiments and their trials")
    describe.add_argument("experiment_ids", type=id_list, metavar="ID[,ID...]")
    describe.add_argument(
        "--metrics", action="store_true", help="include every step's and validation's metrics"
    )
    describe.add_argument(
        "--importance",
        action="store_true",
        help="rank the hyperparameters by importance to the searcher metric (PED-ANOVA)",
    )
    describe.add_argument(
        "--outdir", metavar="DIR", help="write experiments.csv, trials.csv (and workloads.csv)"
    )
    output.add_format_flags(describe)
    describe.set_defaults(func=describe_experiments)

    trials = commands.add_parser(
        "list-trials", aliases=["lt"], parents=[common], help="list an experiment's trials"
    )
    trials.add_argument("experiment_id", type=positive_int, metavar="ID")
    output.add_format_flags(trials)
    trials.set_defaults(func=list_trials)

    checkpoints = commands.add_parser(
        "list-checkpoints", aliases=["lc"], parents=[common], help="list an experiment's checkpoints"
    )
    checkpoints.add_argument("experiment_id", type=positive_int, metavar="ID")
    checkpoints.add_argument(
        "--best", type=positive_int, metavar="N", help="only the N best checkpoints by the searcher metric"
    )
    output.add_format_flags(checkpoints)
    checkpoints.set_defaults(func=list_experiment_checkpoints)

    download = commands.add_parser(
        "download", parents=[common], help="download the best checkpoints of an experiment"
    )
    download.add_argument("experiment_id", type=positive_int, metavar="ID")
    download.add_argument(
        "--top-n",
        type=positive_int,
        default=1,
        metavar="N",
        help="the N best trials' best checkpoints (default 1)",
    )
    download.add_argument(
        "-o", "--output-dir", default="checkpoints", metavar="DIR", help="default ./checkpoints"
    )
    download.set_defaults(func=download_experiment)


def load(
    client: SchedulerClient, experiment_id: int, steps: bool = False
) -> tuple[Any, list[scheduler_pb2.GetTrialResponse]]:
    response = client.get_experiment(experiment_id)
    return response, client.trial_details(experiment_id, include_steps=steps)


def describe_experiments(args: argparse.Namespace) -> int:
    with connect(args) as client:
        loaded = [load(client, experiment_id, steps=args.metrics) for experiment_id in args.experiment_ids]
    # Only the form asked for is built: for 10,000 trials each costs about a second.
    structured = bool(args.outdir or getattr(args, "json", False) or getattr(args, "csv", False))
    described: list[dict[str, Any]] = []
    ranked = {r.experiment.id: _importance(r) for r, _ in loaded} if args.importance else {}
    for response, details in loaded if structured else []:
        space = records.hparam_space(response.experiment)
        described.append(
            {
                "experiment": records.experiment_record(response.experiment),
                "trials": [records.trial_detail_record(d, space, metrics=args.metrics) for d in details],
            }
            | ({"importance": [vars(i) for i in ranked[response.experiment.id]]} if args.importance else {})
        )
    if args.outdir:
        _write_outdir(Path(args.outdir), described, args.metrics)
        print(
            f"Wrote experiments.csv, trials.csv{', workloads.csv' if args.metrics else ''} to {args.outdir}"
        )
        return 0
    trial_rows = [
        {k: v for k, v in t.items() if not isinstance(v, list)} for d in described for t in d["trials"]
    ]
    text = (
        ""
        if structured
        else "\n\n".join(
            render.describe_experiment(r, d, steps=args.metrics)
            + (render.importance_table(ranked[r.experiment.id]) if args.importance else "")
            for r, d in loaded
        )
    )
    output.emit(
        args,
        (described if len(described) > 1 else described[0]) if described else {},
        text,
        csv_rows=trial_rows,
    )
    return 0


def _importance(response: scheduler_pb2.GetExperimentResponse) -> list[importance.Importance]:
    from pedl import importance  # PED-ANOVA: only `describe --importance` pays for its import

    try:
        return importance.experiment_importance(response.experiment, response.trials)
    except importance.ImportanceUnavailable as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from None


def _write_outdir(outdir: Path, described: list[dict[str, Any]], metrics: bool) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    experiments = [{k: v for k, v in d["experiment"].items() if k != "config"} for d in described]
    trials = [{k: v for k, v in t.items() if not isinstance(v, list)} for d in described for t in d["trials"]]
    (outdir / "experiments.csv").write_text(records.to_csv(experiments) + "\n")
    (outdir / "trials.csv").write_text(records.to_csv(trials) + "\n")
    if metrics:
        workloads = [
            {"trial_id": t["id"], "kind": kind, **w}
            for d in described
            for t in d["trials"]
            for kind, key in (("training", "steps"), ("validation", "validations"))
            for w in t.get(key, [])
        ]
        (outdir / "workloads.csv").write_text(records.to_csv(workloads) + "\n")


def list_trials(args: argparse.Namespace) -> int:
    with connect(args) as client:
        response = client.get_experiment(args.experiment_id)
    space = records.hparam_space(response.experiment)
    trials = sorted(response.trials, key=lambda t: t.id)
    rows = [records.trial_record(t, space) for t in trials]
    output.emit(args, rows, render.trials_table(trials) if trials else "Trials: none")
    return 0


def ranked_checkpoints(
    response: scheduler_pb2.GetExperimentResponse, details: list[scheduler_pb2.GetTrialResponse]
) -> list[tuple[common_pb2.Checkpoint, Any]]:
    """Completed checkpoints with their validation's searcher metric, best first (unvalidated last)."""
    metric = response.experiment.searcher_metric
    sign = 1 if response.experiment.smaller_is_better else -1
    ranked = []
    for detail in details:
        validations = {v.total_batches: from_struct(v.metrics) for v in detail.validations}
        for c in detail.checkpoints:
            if c.state != common_pb2.CHECKPOINT_STATE_COMPLETED:
                continue
            value = validations.get(c.total_batches, {}).get(metric)
            ranked.append((c, value if isinstance(value, (int, float)) else None))

    def key(item: tuple[common_pb2.Checkpoint, Any]) -> tuple[bool, float, int, int]:
        c, value = item
        missing = value is None or not math.isfinite(value)
        return (missing, 0.0 if missing else sign * value, c.trial_id, -c.total_batches)

    return sorted(ranked, key=key)


def list_experiment_checkpoints(args: argparse.Namespace) -> int:
    with connect(args) as client:
        response, details = load(client, args.experiment_id)
    metric = response.experiment.searcher_metric
    ranked = ranked_checkpoints(response, details)
    if args.best:
        ranked = [item for item in ranked if item[1] is not None][: args.best]
    rows = [records.checkpoint_record(c, metric, value) for c, value in ranked]
    text = (
        render.table(
            ["UUID", "TRIAL", "BATCHES", "STATE", "SIZE", metric or "VALIDATION", "CREATED"],
            [
                (
                    r["uuid"],
                    r["trial_id"],
                    r["total_batches"],
                    r["state"],
                    render.human_bytes(r["size_bytes"]),
                    "" if r["validation_metric"] is None else render.format_value(r["validation_metric"]),
                    render.short_time(r["created_at"] or ""),
                )
                for r in rows
            ],
        )
        if rows
        else f"Experiment {args.experiment_id} has no checkpoints."
    )
    output.emit(args, rows, text)
    return 0


def download_experiment(args: argparse.Namespace) -> int:
    from pedl.cli.cmd_checkpoint import fetch_checkpoint

    with connect(args) as client:
        response, details = load(client, args.experiment_id)
    best_per_trial: dict[int, common_pb2.Checkpoint] = {}
    for c, _ in ranked_checkpoints(response, details):
        best_per_trial.setdefault(c.trial_id, c)
    chosen = list(best_per_trial.values())[: args.top_n]
    if not chosen:
        raise CliError(f"experiment {args.experiment_id} has no completed checkpoints")
    root = Path(args.output_dir)
    for c in chosen:
        target = root / c.uuid
        if target.exists() and any(target.iterdir()):
            raise CliError(f"output directory {target} exists and is not empty", EXIT_BAD_INPUT)
    for c in chosen:
        fetch_checkpoint(args, c.uuid, root / c.uuid)
    return 0
