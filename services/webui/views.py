"""What each page shows, as JSON-ready dicts made from scheduler messages (pure: no network here).

Every value passes through `pedl.records`, the one conversion layer the CLI and SDK use too, so a
state, a hyperparameter or a count reads the same on a page as in `det e describe --json`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pedl import importance, records
from pedl.config.experiment import ExperimentConfig
from pedl.config.masking import MASK
from pedl.records import flat_hparams
from pedl.v1 import scheduler_pb2
from pedl_webui import configs

TERMINAL = frozenset({"COMPLETED", "ERROR", "CANCELED"})


def progress(
    trials: Sequence[dict[str, Any]], planned: int | None, lengths: Mapping[int, int | None]
) -> float | None:
    """Fraction of the search done: ended trials count whole, live ones by batches of their length
    (`lengths`, by trial id, as the scheduler counts it; None: unknown); None before the first trial."""
    if not trials:
        return None
    planned = planned if planned is not None and planned >= len(trials) else len(trials)
    done = 0.0
    for t in trials:
        length = lengths.get(t["id"])
        if t["state"] in TERMINAL:
            done += 1.0
        elif length:
            done += min(t["total_batches"] / length, 1.0)
    return round(done / planned, 4)


def best_metric(trials: Iterable[dict[str, Any]], smaller_is_better: bool) -> float | None:
    values = [t["best_validation_metric"] for t in trials if _finite(t["best_validation_metric"])]
    if not values:
        return None
    return min(values) if smaller_is_better else max(values)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def experiment_summary(response: scheduler_pb2.GetExperimentResponse) -> dict[str, Any]:
    """One row of the experiments page."""
    config = configs.experiment_config(response.experiment)
    trials = [records.trial_record(t) for t in response.trials]
    lengths = {t.id: configs.trial_length(config, t) for t in response.trials}
    return _summary(response, config, trials, lengths)


def _summary(
    response: scheduler_pb2.GetExperimentResponse,
    config: ExperimentConfig | None,
    trials: Sequence[dict[str, Any]],
    lengths: Mapping[int, int | None],
) -> dict[str, Any]:
    """`experiment_summary` from every trial's record and length, made once by the caller."""
    exp = records.experiment_record(response.experiment, with_config=False)
    return exp | {
        "searcher": config.searcher_name if config is not None else "",
        "progress": progress(trials, config.max_trials if config is not None else None, lengths),
        "best_metric": best_metric(trials, exp["smaller_is_better"]),
        "num_trials": len(trials),
        "active_trials": sum(1 for t in trials if t["state"] == "ACTIVE"),
    }


def experiment_detail(
    response: scheduler_pb2.GetExperimentResponse, only: Collection[int] = ()
) -> dict[str, Any]:
    """The experiment page: its record and config, each trial, and what its searcher decided. With
    `only` (the compare page's trials), those trials alone: the summary still counts them all, but
    the page is not sent (nor made) the other 990 of a 1,000-trial search. Each trial's record is
    made once (at 1,000 trials, making them is most of the web UI's time on this page)."""
    config = configs.experiment_config(response.experiment)
    space = configs.hparam_space(config)
    shown = [t for t in response.trials if not only or t.id in only]
    trials = [records.trial_record(t, space) for t in sorted(shown, key=lambda t: t.id)]
    lengths = {t.id: configs.trial_length(config, t) for t in shown}
    summary = experiment_summary(response) if only else _summary(response, config, trials, lengths)
    for t in trials:
        t["hparams"] = flat_hparams(t["hparams"])
    names = sorted({k for t in trials for k in t["hparams"]})
    return summary | {
        "config_yaml": response.experiment.config_yaml,
        "trials": trials,
        "hparam_names": names,
        # The scatter and parallel coordinates leave out what the scheduler masked (api_key: ****).
        "plotted_hparams": [n for n in names if any(t["hparams"].get(n, MASK) != MASK for t in trials)],
        "rungs": rungs(trials, summary["searcher"], lengths),
        "lineage": lineage(trials),
        "lineage_title": lineage_title(summary["searcher"]),
    }


def importance_view(
    response: scheduler_pb2.GetExperimentResponse, ranked: Sequence[importance.Importance] | None = None
) -> dict[str, Any]:
    """Each hyperparameter's importance to the searcher metric (pedl.importance, PED-ANOVA); `ranked`
    when already known (the web UI's importance cache)."""
    if ranked is None:
        space = configs.hparam_space(configs.experiment_config(response.experiment))
        ranked = importance.experiment_importance(response.experiment, response.trials, space or {})
    return {
        "metric": response.experiment.searcher_metric,
        "importance": [{"name": i.name, "importance": i.importance} for i in ranked],
        "min_trials": importance.MIN_TRIALS,
    }


def rungs(
    trials: Sequence[dict[str, Any]], searcher: str, lengths: Mapping[int, int | None]
) -> list[dict[str, Any]]:
    """For ASHA (adaptive*): the trials that ended short of their full length (`lengths`, by trial
    id), grouped by where they stopped (a rung), so the page shows which trials were cut at which rung."""
    if not searcher.startswith(("asha", "adaptive")):
        return []
    stopped: dict[int, list[int]] = {}
    for t in trials:
        length = lengths.get(t["id"])
        if t["state"] == "COMPLETED" and (length is None or t["total_batches"] < length):
            stopped.setdefault(t["total_batches"], []).append(t["id"])
    return [{"batches": b, "stopped_trials": ids} for b, ids in sorted(stopped.items())]


def lineage(trials: Sequence[dict[str, Any]]) -> list[dict[str, int]]:
    """Which trial started from which trial's checkpoint (PBT exploit, ASHA resume)."""
    return [
        {"trial_id": t["id"], "parent_trial_id": t["parent_trial_id"]} for t in trials if t["parent_trial_id"]
    ]


def lineage_title(searcher: str) -> str:
    """What starting from another trial's checkpoint means under this searcher."""
    if searcher == "pbt":
        return "Started from another trial's checkpoint (PBT exploit)"
    if searcher.startswith(("asha", "adaptive")):
        return "Resumed from a stopped trial's checkpoint (ASHA promotion)"
    return "Started from another trial's checkpoint"


def trial_detail(
    response: scheduler_pb2.GetTrialResponse, experiment: scheduler_pb2.Experiment
) -> dict[str, Any]:
    """The trial page: its record, hyperparameters, checkpoints (with their validations) and its
    custom metric groups' names and counts (each group's rows stream apart, `/api/trials/ID/metrics
    ?group=`, and the page folds its figures from them)."""
    space = configs.hparam_space(configs.experiment_config(experiment))
    trial = records.trial_record(response.trial, space)
    trial["hparams"] = flat_hparams(trial["hparams"])
    validations = {v.total_batches: records.validation_record(v)["metrics"] for v in response.validations}
    checkpoints = [
        {
            "uuid": c.uuid,
            "total_batches": c.total_batches,
            "state": records.checkpoint_state(c.state),
            "size": c.total_size or sum(f.size for f in c.files),
            "files": [{"path": f.path, "size": f.size} for f in sorted(c.files, key=lambda f: f.path)],
            "validation": _json_safe(validations.get(c.total_batches)),
        }
        for c in sorted(response.checkpoints, key=lambda c: (c.total_batches, c.uuid))
    ]
    groups = [
        {"group": g.group, "reports": g.reports, "last_batches": g.last_batches}
        for g in response.metric_groups
    ]
    return trial | {"checkpoints": checkpoints, "metric_groups": groups}


def cluster_view(
    agents: Sequence[scheduler_pb2.Agent],
    experiments: Sequence[scheduler_pb2.GetExperimentResponse],
    pilot_jobs: Sequence[scheduler_pb2.PilotJob] = (),
    gc_tasks: Sequence[scheduler_pb2.CheckpointGcTask] = (),
) -> dict[str, Any]:
    """Agents, their slots and who holds each (trial, experiment, owner), the queued trials, the
    Slurm pools' pilot jobs (pending ones with Slurm's reason) and the checkpoint GC tasks."""
    holders: dict[int, dict[str, Any]] = {}
    queued: list[dict[str, Any]] = []
    for response in experiments:
        exp = response.experiment
        for t in response.trials:
            info = {"trial_id": t.id, "experiment_id": exp.id, "owner": exp.owner}
            if records.trial_state(t.state) == "ACTIVE" and not t.agent_id:
                queued.append(info | {"total_batches": t.total_batches})
            else:
                holders[t.id] = info
    slots = records.slot_records(agents)
    for s in slots:
        held = holders.get(s["trial_id"] or -1, {})
        s["experiment_id"], s["owner"] = held.get("experiment_id"), held.get("owner")
    return {
        "agents": [records.agent_record(a) | {"label": a.label, "isolation": a.isolation} for a in agents],
        "slots": slots,
        "queued": queued,
        "pilot_jobs": [
            {
                "job_id": j.job_id,
                "resource_pool": j.resource_pool,
                "partition": j.partition,
                "state": j.state,
                "reason": j.reason,
                "nodes": j.nodes,
                "node_list": j.node_list,
                "time_left": j.time_left,
            }
            for j in pilot_jobs
        ],
        "gc_tasks": [
            {
                "task_id": t.task_id,
                "name": t.name,
                "experiment_id": t.experiment_id,
                "checkpoints": len(t.checkpoint_uuids),
                "started_at": t.started_at,
                "state": "RUNNING" if t.running else "WAITING",
            }
            for t in gc_tasks
        ],
    }


def _json_safe(value: Any) -> Any:
    """NaN and infinities as null: JSON (and so the browser) has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(_json_safe(value), separators=(",", ":"))


def metrics_event(response: scheduler_pb2.GetMetricsResponse) -> str:
    """A GetMetrics message as one compact JSON event for the page:
    {"series": [[trial_id, "t"|"v"|"g", [batches...], [{metric: value}...]], ...], "caught_up": bool}
    ("g": a custom group's rows, the one group the page asked for).

    The stored metric objects are spliced in as the scheduler sent them (no parse, no re-encode: an
    experiment's 100,000 rows pass in tens of milliseconds); only one holding NaN or an infinity is
    re-encoded, as null. The scheduler bounds each curve's rows (`max_points` in the request).
    """
    parts = []
    for s in response.series:
        kind = "g" if s.group else "t" if s.kind == scheduler_pb2.METRIC_KIND_TRAINING else "v"
        rows, batches = list(s.metrics_json), list(s.total_batches)
        objects = ",".join(rows)
        if "NaN" in objects or "Infinity" in objects:  # rare: only then look at each row
            objects = ",".join(_finite_json(m) for m in rows)
        parts.append(f'[{s.trial_id},"{kind}",[{",".join(map(str, batches))}],[{objects}]]')
    return f'{{"series":[{",".join(parts)}],"caught_up":{"true" if response.caught_up else "false"}}}'


def _finite_json(text: str) -> str:
    if "NaN" in text or "Infinity" in text:
        return dumps(json.loads(text))
    return text


def log_event(lines: Iterable[Any]) -> str:
    """Log lines, each marked system (pedl's own) or not (the user's output), as one JSON event."""
    return dumps({"lines": [records.log_record(line) for line in lines]})
