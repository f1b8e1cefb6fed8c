"""Pure text formatting for the CLI (tables, metrics, states, descriptions); no I/O, easy to test."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pedl._metrics import from_struct
from pedl.records import (
    checkpoint_state,
    early_exit_reason,
    experiment_state,
    metric_group_record,
    trial_state,
)
from pedl.v1 import common_pb2, scheduler_pb2

if TYPE_CHECKING:  # pedl.importance (PED-ANOVA) is imported by `describe --importance` alone
    from pedl.importance import Importance

_MAX_LIST_ITEMS = 6
TERMINAL_EXPERIMENT_STATES = frozenset(
    {
        common_pb2.EXPERIMENT_STATE_COMPLETED,
        common_pb2.EXPERIMENT_STATE_ERROR,
        common_pb2.EXPERIMENT_STATE_CANCELED,
    }
)
TERMINAL_TRIAL_STATES = frozenset(
    {common_pb2.TRIAL_STATE_COMPLETED, common_pb2.TRIAL_STATE_ERROR, common_pb2.TRIAL_STATE_CANCELED}
)


def short_time(timestamp: str) -> str:
    """RFC 3339 → 'YYYY-MM-DD HH:MM:SS' (UTC); anything unparseable is shown as it came."""
    if not timestamp:
        return ""
    try:
        parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return timestamp
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc)
    return parsed.strftime("%Y-%m-%d %H:%M:%S")


def format_value(value: Any) -> str:
    """A metric or hyperparameter value, compactly; long (tensor) lists are elided."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        items = [format_value(v) for v in value[:_MAX_LIST_ITEMS]]
        if len(value) > _MAX_LIST_ITEMS:
            items.append(f"… ({len(value)} values)")
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def metric_names(metric_dicts: Iterable[Mapping[str, Any]]) -> list[str]:
    """Union of names, `loss` first, then alphabetical."""
    names: set[str] = set()
    for metrics in metric_dicts:
        names.update(metrics)
    return sorted(names, key=lambda n: (n != "loss", n))


def format_metrics(metrics: Mapping[str, Any]) -> str:
    return " ".join(f"{name}={format_value(metrics[name])}" for name in metric_names([metrics]))


def format_hparams(hparams: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(hparams[k])}" for k in sorted(hparams))


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def experiments_table(experiments: Iterable[scheduler_pb2.Experiment]) -> str:
    rows = [
        (
            e.id,
            experiment_state(e.state),
            e.name,
            e.description,
            e.num_trials,
            short_time(e.created_at),
            short_time(e.ended_at),
            e.owner,
        )
        for e in sorted(experiments, key=lambda e: e.id)
    ]
    return table(["ID", "STATE", "NAME", "DESCRIPTION", "TRIALS", "CREATED", "ENDED", "OWNER"], rows)


def _best(trial: scheduler_pb2.Trial) -> str:
    return format_value(trial.best_validation_metric) if trial.HasField("best_validation_metric") else ""


def trials_table(trials: Iterable[scheduler_pb2.Trial]) -> str:
    rows = [
        (
            t.id,
            trial_state(t.state),
            format_hparams(from_struct(t.hparams)),
            t.total_batches,
            t.num_steps,
            t.restarts,
            _best(t),
        )
        for t in sorted(trials, key=lambda t: t.id)
    ]
    return table(["ID", "STATE", "HPARAMS", "BATCHES", "STEPS", "RESTARTS", "BEST VALIDATION"], rows)


def steps_table(steps: Iterable[scheduler_pb2.Step]) -> str:
    steps = sorted(steps, key=lambda s: s.total_batches)
    metrics = [from_struct(s.metrics) for s in steps]
    names = metric_names(metrics)
    rows = [
        (
            s.step_id,
            s.total_batches,
            s.num_batches,
            *(format_value(m.get(n, "")) for n in names),
            short_time(s.end_time),
        )
        for s, m in zip(steps, metrics, strict=True)
    ]
    return table(["STEP", "BATCHES", "STEP BATCHES", *names, "ENDED"], rows)


def validations_table(validations: Iterable[scheduler_pb2.Validation]) -> str:
    validations = sorted(validations, key=lambda v: v.total_batches)
    metrics = [from_struct(v.metrics) for v in validations]
    names = metric_names(metrics)
    rows = [
        (v.step_id, v.total_batches, *(format_value(m.get(n, "")) for n in names), short_time(v.end_time))
        for v, m in zip(validations, metrics, strict=True)
    ]
    return table(["STEP", "BATCHES", *names, "ENDED"], rows)


def checkpoints_table(checkpoints: Iterable[common_pb2.Checkpoint]) -> str:
    rows = [
        (
            c.uuid,
            c.total_batches,
            len(c.files),
            human_bytes(c.total_size or sum(f.size for f in c.files)),
            checkpoint_state(c.state),
            short_time(c.created_at),
        )
        for c in sorted(checkpoints, key=lambda c: c.total_batches)
    ]
    return table(["UUID", "BATCHES", "FILES", "SIZE", "STATE", "CREATED"], rows)


def pilot_jobs_text(jobs: Sequence[scheduler_pb2.PilotJob]) -> str:
    """The Slurm pools' pilot jobs under an agent or slot listing ("" when there are none)."""
    if not jobs:
        return ""
    rows = [
        (
            j.job_id,
            j.resource_pool,
            j.partition,
            j.state,
            f"({j.reason})" if j.reason and j.reason != "None" else "-",
            j.nodes,
            j.node_list or "-",
            j.time_left or "-",
        )
        for j in jobs
    ]
    headers = ["SLURM JOB", "RESOURCE POOL", "PARTITION", "STATE", "REASON", "NODES", "NODELIST", "TIME LEFT"]
    return "\n\nSlurm pilot jobs (their agents are slurm-<job>-<node>):\n" + table(headers, rows)


def agents_table(agents: Iterable[scheduler_pb2.Agent]) -> str:
    rows = [
        (
            a.id,
            a.hostname,
            a.address or "-",
            len(a.slots),
            sum(1 for s in a.slots if s.trial_id),
            a.resource_pool,
            a.label or "-",
            "no" if a.disabled else "yes",
            _isolation(a.isolation),
            short_time(a.last_heartbeat),
        )
        for a in sorted(agents, key=lambda a: a.id)
    ]
    return table(
        [
            "ID",
            "HOSTNAME",
            "ADDRESS",
            "SLOTS",
            "USED",
            "RESOURCE POOL",
            "LABEL",
            "ENABLED",
            "ISOLATION",
            "LAST HEARTBEAT",
        ],
        rows,
    )


def _isolation(isolation: str) -> str:
    """`none` says what it means: trials on that agent see what the agent sees ("": an older agent)."""
    return "none (trials unsandboxed)" if isolation == "none" else isolation


def slots_table(agents: Iterable[scheduler_pb2.Agent]) -> str:
    rows = [
        (a.id, s.id, s.type, s.device, "no" if a.disabled or s.disabled else "yes", s.trial_id or "free")
        for a in sorted(agents, key=lambda a: a.id)
        for s in a.slots
    ]
    return table(["AGENT", "SLOT", "TYPE", "DEVICE", "ENABLED", "TRIAL"], rows)


def _fields(pairs: Iterable[tuple[str, Any]]) -> list[str]:
    """'Label: value' lines, skipping empty values, labels aligned."""
    kept = [(k, str(v)) for k, v in pairs if v not in ("", None)]
    width = max((len(k) for k, _ in kept), default=0) + 1
    lines: list[str] = []
    for key, value in kept:
        first, *rest = value.splitlines() or [""]
        lines.append(f"{(key + ':').ljust(width)} {first}")
        lines.extend(" " * (width + 1) + r for r in rest)
    return lines


def _config_value(value: Any) -> str:
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: (kv[0] != "name", kv[0]))  # maps have no order
        return " ".join(f"{k}={format_value(v)}" for k, v in items if not isinstance(v, Mapping))
    return format_value(value)


def config_summary(config: Mapping[str, Any]) -> list[str]:
    """The validated config's settings, one line per top-level key; hyperparameters one per name."""
    skip = {"description", "hyperparameters"}
    pairs = [(f"  {k}", _config_value(v)) for k, v in sorted(config.items()) if k not in skip]
    hparams = config.get("hyperparameters") or {}
    pairs += [(f"  hyperparameter {k}", _config_value(v)) for k, v in sorted(hparams.items())]
    return _fields(pairs)


def experiment_summary(experiment: scheduler_pb2.Experiment) -> str:
    metric = experiment.searcher_metric
    if metric:
        metric += " (smaller is better)" if experiment.smaller_is_better else " (larger is better)"
    lines = _fields(
        [
            ("Experiment", experiment.id),
            ("State", experiment_state(experiment.state)),
            ("Description", experiment.description),
            ("Labels", ", ".join(experiment.labels)),
            ("Archived", "yes" if experiment.archived else ""),
            ("Owner", experiment.owner),
            ("Model definition", experiment.model_definition_name),
            ("Searcher metric", metric),
            ("Trials", experiment.num_trials),
            ("Created", short_time(experiment.created_at)),
            ("Ended", short_time(experiment.ended_at)),
            ("Error", experiment.error),
        ]
    )
    from pedl.config import received  # the config's modules are loaded only where a config is read

    parsed = received.experiment_config(experiment)
    # The Struct form (numbers all floats) only for a stored config this pedl no longer reads.
    config = parsed.raw if parsed is not None else from_struct(experiment.config)
    if config:
        lines += ["Configuration:", *config_summary(config)]
    if parsed is not None:
        lengths = "; ".join(parsed.describe_lengths())
        lines += [f"Lengths: {lengths}"] if lengths else []
        lines += [f"Warning: {w}" for w in parsed.warnings]
    return "\n".join(lines)


def trial_summary(trial: scheduler_pb2.Trial) -> str:
    return "\n".join(
        _fields(
            [
                ("Trial", trial.id),
                ("Experiment", trial.experiment_id),
                ("State", trial_state(trial.state)),
                ("Hyperparameters", format_hparams(from_struct(trial.hparams))),
                ("Batches", trial.total_batches),
                (
                    "Epoch",
                    f"{trial.epoch_batches} batches (its training data loader)"
                    if trial.epoch_batches
                    else "",
                ),
                ("Steps", trial.num_steps),
                ("Restarts", trial.restarts),
                ("Run", trial.run_id),
                ("Seed", trial.seed),
                ("Agent", trial.agent_id),
                ("Ran on", "" if trial.agent_id else ", ".join(trial.ran_on)),
                ("Slurm job", trial.slurm_job),
                ("Best validation", _best(trial)),
                ("Latest checkpoint", trial.latest_checkpoint_uuid),
                ("Started", short_time(trial.start_time)),
                ("Ended", short_time(trial.end_time)),
                ("Waiting", trial.waiting_reason),
                ("Exited early", _early_exit(trial.early_exit)),
                ("Error", trial.error),
            ]
        )
    )


_EARLY_EXITS = {
    "INVALID_HP": "INVALID_HP: its code reported invalid hyperparameters",
    "USER_REQUESTED_STOP": "USER_REQUESTED_STOP: its code asked to stop (set_stop_requested)",
}


def _early_exit(reason: int) -> str:
    name = early_exit_reason(reason)
    return _EARLY_EXITS.get(name, name) if name else ""


def trial_details(detail: scheduler_pb2.GetTrialResponse, heading: bool = False, steps: bool = True) -> str:
    """Training steps (unless `steps` is false), validations and checkpoints of one trial."""
    parts = [f"Trial {detail.trial.id}"] if heading else []
    sections: tuple[tuple[str, Any, Callable[[Any], str]], ...] = (
        ("Training steps", detail.steps, steps_table),
        ("Validations", detail.validations, validations_table),
        ("Checkpoints", detail.checkpoints, checkpoints_table),
    )
    for title, items, render in sections if steps else sections[1:]:
        parts.append(f"{title}:\n{render(items)}" if items else f"{title}: none")
    if detail.metric_groups:  # only GetTrial sends them: an experiment's trials list none
        parts.append(f"Metric groups:\n{metric_groups_table(detail.metric_groups)}")
    return "\n\n".join(parts)


def metric_groups_table(groups: Iterable[scheduler_pb2.MetricGroupSummary]) -> str:
    """Each custom group's metrics: how often reported, the last value and, for numbers, the range."""
    rows = []
    for g in sorted(groups, key=lambda g: g.group):
        for name, f in sorted(metric_group_record(g)["metrics"].items()):
            figures = (format_value(f.get(k, "")) for k in ("last", "min", "max", "mean"))
            rows.append((g.group, name, f["count"], g.last_batches, *figures))
    return table(["GROUP", "METRIC", "REPORTS", "LAST BATCHES", "LAST", "MIN", "MAX", "MEAN"], rows)


def describe_trial(
    detail: scheduler_pb2.GetTrialResponse,
    steps: bool = True,
    group_reports: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    """`group_reports` (--metrics): each custom group's every report, after the groups' figures."""
    text = trial_summary(detail.trial) + "\n\n" + trial_details(detail, steps=steps)
    for group, reports in sorted((group_reports or {}).items()):
        names = metric_names([r["metrics"] for r in reports])
        rows = [
            (
                r["total_batches"],
                *(format_value(r["metrics"].get(n, "")) for n in names),
                short_time(r["end_time"] or ""),
            )
            for r in reports
        ]
        text += f"\n\nMetric group {group}:\n" + table(["BATCHES", *names, "ENDED"], rows)
    if detail.timeline:
        text += "\n\nTimeline (seconds from the run's slot assignment):\n" + timeline_table(detail.timeline)
    return text


def timeline_table(phases: Iterable[common_pb2.TimelinePhase]) -> str:
    from pedl.timeline import timeline_records

    rows = [
        (r["run_id"], f"{r['offset_seconds']:.3f}", f"{r['seconds']:.3f}", r["source"], r["name"])
        for r in timeline_records(phases)
    ]
    return table(["RUN", "AT", "SECONDS", "BY", "PHASE"], rows)


def describe_experiment(
    response: scheduler_pb2.GetExperimentResponse,
    details: Sequence[scheduler_pb2.GetTrialResponse],
    steps: bool = True,
) -> str:
    parts = [experiment_summary(response.experiment)]
    parts.append(f"Trials:\n{trials_table(response.trials)}" if response.trials else "Trials: none")
    waiting = [f"trial {t.id}: {t.waiting_reason}" for t in response.trials if t.waiting_reason]
    if waiting:
        parts.append("Waiting:\n" + "\n".join(waiting))
    parts.extend(trial_details(d, heading=True, steps=steps) for d in details)
    return "\n\n".join(parts)


def importance_table(ranked: Sequence[Importance]) -> str:
    """`describe --importance`: the hyperparameters, most important first, after the experiment."""
    if not ranked:
        return "\n\nImportance: none yet (needs validated trials and a hyperparameter that varies)"
    rows = [(i.name, f"{i.importance:.3f}") for i in ranked]
    return "\n\nImportance (PED-ANOVA, of the searcher metric):\n" + table(
        ["HYPERPARAMETER", "IMPORTANCE"], rows
    )


def experiment_checkpoints_table(details: Iterable[scheduler_pb2.GetTrialResponse], metric: str) -> str:
    """Every trial's checkpoints, with the searcher metric of the validation at the same batch count."""
    rows = []
    for detail in sorted(details, key=lambda d: d.trial.id):
        validations = {v.total_batches: from_struct(v.metrics) for v in detail.validations}
        for c in sorted(detail.checkpoints, key=lambda c: (c.total_batches, c.uuid)):
            value = validations.get(c.total_batches, {}).get(metric)
            rows.append(
                (
                    c.uuid,
                    detail.trial.id,
                    c.total_batches,
                    checkpoint_state(c.state),
                    human_bytes(c.total_size or sum(f.size for f in c.files)),
                    "" if value is None else format_value(value),
                    short_time(c.created_at),
                )
            )
    return table(["UUID", "TRIAL", "BATCHES", "STATE", "SIZE", metric or "VALIDATION", "CREATED"], rows)


def describe_checkpoint(checkpoint: common_pb2.Checkpoint, validation: Mapping[str, Any]) -> str:
    """`det checkpoint describe`: where it came from, what it holds, the validation at its batch."""
    size = checkpoint.total_size or sum(f.size for f in checkpoint.files)
    head = _fields(
        [
            ("UUID", checkpoint.uuid),
            ("Experiment", checkpoint.experiment_id),
            ("Trial", checkpoint.trial_id),
            ("Batches", checkpoint.total_batches),
            ("State", checkpoint_state(checkpoint.state)),
            ("Stored", short_time(checkpoint.created_at)),
            ("Size", f"{human_bytes(size)} in {len(checkpoint.files)} files"),
            ("Validation", format_metrics(validation) if validation else ""),
            ("Metadata", format_hparams(dict(checkpoint.metadata))),
        ]
    )
    files = table(["File", "Size"], [(f.path, human_bytes(f.size)) for f in checkpoint.files])
    return "\n".join(head) + "\n\n" + files
