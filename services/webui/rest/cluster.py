"""Agents, slots and resource pools (`det agent list`, `det slot list`, `det resources`)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import Caller, caller, int_param, ok, page
from pedl_webui.rest.master import API_VERSION

_DEVICE_TYPE = {"cpu": "TYPE_CPU", "gpu": "TYPE_CUDA"}


def _slot(agent: scheduler_pb2.Agent, index: int, slot: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": slot.id,
        "device": {
            "id": index,
            "brand": slot.device or slot.type,
            "uuid": f"{agent.id}/{slot.id}",
            "type": _DEVICE_TYPE.get(slot.type, "TYPE_UNSPECIFIED"),
        },
        "enabled": not (slot.disabled or agent.disabled),
        "draining": False,
        "container": None,  # a free slot: null, as Determined's gateway writes unset fields
    }
    if slot.trial_id:
        value["container"] = {
            "id": f"trial-{slot.trial_id}",
            "state": "STATE_RUNNING",
            "devices": [value["device"]],
        }
    return value


def agent_json(agent: scheduler_pb2.Agent) -> dict[str, Any]:
    slots = {str(i): _slot(agent, i, s) for i, s in enumerate(agent.slots)}
    stats: dict[str, dict[str, int]] = {}
    for s in slots.values():
        entry = stats.setdefault(s["device"]["type"], {"total": 0, "disabled": 0, "draining": 0})
        entry["total"] += 1
        entry["disabled"] += 0 if s["enabled"] else 1
    brands = Counter(s["device"]["brand"] for s in slots.values())
    return {
        "id": agent.id,
        "registeredTime": agent.connected_at or None,
        "slots": slots,
        "containers": {s["container"]["id"]: s["container"] for s in slots.values() if s["container"]},
        "resourcePools": [agent.resource_pool or "default"],
        "addresses": [agent.address] if agent.address else [],
        "enabled": not agent.disabled,
        "draining": False,
        # The API version the master reports: Determined's clients expect agents to match it.
        "version": API_VERSION,
        "slotStats": {
            "typeStats": {k: {**v, "states": {}} for k, v in stats.items()},
            "brandStats": {
                k: {"total": n, "disabled": 0, "draining": 0, "states": {}} for k, n in brands.items()
            },
        },
    }


def _agents(request: Request) -> list[scheduler_pb2.Agent]:
    return list(caller(request).call("ListAgents", scheduler_pb2.ListAgentsRequest()).agents)


def agents(request: Request) -> JSONResponse:
    rows = [agent_json(a) for a in _agents(request)]
    pool = request.query_params.get("label") or ""
    if pool:
        rows = [a for a in rows if pool in a["resourcePools"]]
    offset, limit = int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)
    return ok(page(rows, offset, limit, "agents"))


def _agent(request: Request) -> scheduler_pb2.Agent:
    name = request.path_params["agentId"]
    for a in _agents(request):
        if a.id == name:
            return a
    raise GatewayError(404, f"agent {name!r} not found")


def agent(request: Request) -> JSONResponse:
    return ok({"agent": agent_json(_agent(request))})


def slots(request: Request) -> JSONResponse:
    return ok({"slots": list(agent_json(_agent(request))["slots"].values())})


def resource_pools(request: Request) -> JSONResponse:
    """pedl's agents each name a pool (default "default"); a Slurm pool is listed while it has pilot
    jobs, pending ones too (`det job list -r POOL` looks its pool up here), with its partition."""
    listed = caller(request).call("ListAgents", scheduler_pb2.ListAgentsRequest())
    by_pool: dict[str, list[scheduler_pb2.Agent]] = {}
    for a in listed.agents:
        by_pool.setdefault(a.resource_pool or "default", []).append(a)
    by_pool.setdefault("default", [])
    partitions: dict[str, str] = {}
    for j in listed.pilot_jobs:
        by_pool.setdefault(j.resource_pool, [])
        partitions[j.resource_pool] = j.partition
    rows = [_pool(name, members, partitions.get(name, "")) for name, members in sorted(by_pool.items())]
    offset, limit = int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)
    return ok(page(rows, offset, limit, "resourcePools"))


def _pool(name: str, members: list[scheduler_pb2.Agent], partition: str = "") -> dict[str, Any]:
    all_slots = [s for a in members for s in a.slots]
    gpu = any(s.type == "gpu" for s in all_slots)
    return {
        "name": name,
        "description": f"Slurm partition {partition}: pilot agents in Slurm jobs" if partition else "",
        "type": "RESOURCE_POOL_TYPE_STATIC",
        "numAgents": len(members),
        "slotsAvailable": len(all_slots),
        "slotsUsed": sum(1 for s in all_slots if s.trial_id),
        "slotType": "TYPE_CUDA" if gpu else "TYPE_CPU",
        "auxContainerCapacity": 0,
        "auxContainersRunning": 0,
        "defaultComputePool": name == "default",
        "defaultAuxPool": name == "default",
        "preemptible": True,
        "minAgents": 0,
        "maxAgents": 0,
        "slotsPerAgent": max((len(a.slots) for a in members), default=0),
        "auxContainerCapacityPerAgent": 0,
        "schedulerType": "SCHEDULER_TYPE_FAIR_SHARE",
        "schedulerFittingPolicy": "FITTING_POLICY_BEST",
        "location": f"slurm:{partition}" if partition else "on-prem",
        "imageId": "",
        "instanceType": "",
        "masterUrl": "",
        "masterCertName": "",
        "startupScript": "",
        "containerStartupScript": "",
        "agentDockerNetwork": "",
        "agentDockerRuntime": "",
        "agentDockerImage": "",
        "agentFluentImage": "",
        "maxIdleAgentPeriod": 0,
        "maxAgentStartingPeriod": 0,
        "details": {},
        "resourceManagerMetadata": {},
        "clusterName": "pedl",
    }


def _gc_summary(task: scheduler_pb2.CheckpointGcTask) -> dict[str, Any]:
    """A checkpoint GC task as Determined's allocation summary: its name is what clients match."""
    allocation = f"{task.task_id}.1"
    return {
        "allocationId": allocation,
        "taskId": task.task_id,
        "name": task.name,
        "resourcePool": "default",
        "registeredTime": task.started_at or None,
        "schedulerType": "fair_share",
        "slotsNeeded": 0,
        "resources": [],
        "proxyPorts": [],
    }


def allocations(c: Caller) -> dict[str, dict[str, Any]]:
    """The running trials and checkpoint GC tasks as Determined's allocation summaries (`det slot
    list` names each busy slot's task from these; e2e tests find an experiment's by its name)."""
    listed = c.call("ListAgents", scheduler_pb2.ListAgentsRequest())
    summaries: dict[str, Any] = {}
    for a in listed.agents:
        for s in a.slots:
            if not s.trial_id:
                continue
            allocation = f"trial-{s.trial_id}.1"
            entry = summaries.get(allocation)
            if entry is None:
                trial = c.call(
                    "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=s.trial_id, page_size=1)
                ).trial
                entry = summaries[allocation] = {
                    "allocationId": allocation,
                    "taskId": f"trial-{s.trial_id}",
                    "name": f"Trial {s.trial_id} (Experiment {trial.experiment_id})",  # Determined's name
                    "resourcePool": a.resource_pool or "default",
                    # Determined's `det task list` sorts by it: a trial's start, as a GC task's.
                    "registeredTime": trial.start_time or None,
                    "schedulerType": "fair_share",
                    "slotsNeeded": 0,
                    "resources": [],
                    "proxyPorts": [],
                }
            entry["slotsNeeded"] += 1
            entry["resources"].append(
                {
                    "resourcesId": f"{a.id}/{s.id}",
                    "resourcesType": "agent",
                    "allocationId": allocation,
                    "agentDevices": {},
                    "containerId": f"trial-{s.trial_id}",
                    "started": None,
                    "exited": None,
                }
            )
    for task in listed.gc_tasks:
        summaries[f"{task.task_id}.1"] = _gc_summary(task)
    return summaries


def tasks(request: Request) -> JSONResponse:
    """`GET /api/v1/tasks`."""
    return ok({"allocationIdToSummary": allocations(caller(request))})


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def legacy_tasks(request: Request) -> JSONResponse:
    """`GET /tasks`, the master's older route (Determined's e2e helpers poll it): the same summaries,
    keyed by allocation, with the field names of Determined's Go structs (snake_case)."""
    return ok(legacy_shape(allocations(caller(request))))


def legacy_shape(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The summaries with the field names of Determined's Go structs, as its `GET /tasks` writes them."""
    return {
        allocation: {
            _snake(k): ([{_snake(rk): rv for rk, rv in r.items()} for r in v] if k == "resources" else v)
            for k, v in entry.items()
        }
        for allocation, entry in summaries.items()
    }
