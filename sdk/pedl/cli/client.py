"""The CLI's only gRPC dependency: a thin wrapper over SchedulerServiceStub with sane deadlines."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from pedl import _grpc, records
from pedl.client import address
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

# How long --follow, `logs -f` and `wait` keep trying while the scheduler is down (a restart).
OUTAGE_SECONDS = 300.0
_T = TypeVar("_T")
_RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_TIMEOUT = 30.0
# Experiments per ListExperiments call (benchmarks/list_scale.py times one such page).
LIST_PAGE = 500
# Uploading a model definition near the 96 MiB context limit takes a while on slow links.
_UPLOAD_TIMEOUT = 600.0
# The parts a model definition is sent in (the progress bar moves by one).
UPLOAD_CHUNK = 256 * 1024
# GetTrialLogsRequest.tail is an int32.
_MAX_TAIL = 2**31 - 1


def resolve_master(explicit: str | None) -> str:
    """--master, else $PEDL_MASTER, else the default; must be HOST:PORT (or unix:PATH)."""
    return address.resolve_master(explicit, name="--master")


class SchedulerClient(_grpc.Client):
    def __init__(self, address: str) -> None:
        super().__init__(address)
        self._stub = scheduler_pb2_grpc.SchedulerServiceStub(self._channel)
        # Set by commands that watch (--follow, wait): reads then wait for a restarted scheduler.
        self.ride_out_restarts = False
        self._down_since: float | None = None
        self._wait_supported = True

    def _read(self, call: Callable[..., _T], request: Any, timeout: float = 30.0) -> _T:
        """A read-only call, retried by the channel's retryPolicy (pedl._grpc). When riding out
        restarts, a scheduler that stays down is waited for by gRPC's wait_for_ready, for up to
        OUTAGE_SECONDS in all."""
        if not self.ride_out_restarts:
            return call(request, timeout=timeout)
        try:
            return call(request, timeout=timeout, wait_for_ready=True)
        except grpc.RpcError as e:
            if e.code() not in _RETRIED:
                raise
        self._say_waiting()
        result = call(request, timeout=max(OUTAGE_SECONDS - timeout, timeout), wait_for_ready=True)
        self._down_since = None
        return result

    def _say_waiting(self) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            print(
                f"the scheduler at {self.address} is unreachable; waiting for it", file=sys.stderr, flush=True
            )

    def _still_waiting(self) -> bool:
        """For a followed log stream that broke: whether to reconnect (after a second), until the
        scheduler has been gone OUTAGE_SECONDS."""
        self._say_waiting()
        assert self._down_since is not None
        if time.monotonic() - self._down_since > OUTAGE_SECONDS:
            return False
        time.sleep(1.0)
        return True

    def create_experiment(
        self,
        config_yaml: str,
        model_definition: bytes,
        model_definition_name: str,
        sent: Callable[[int], None] | None = None,
        paused: bool = False,
    ) -> scheduler_pb2.Experiment:
        """Sends the model definition in parts (UploadExperiment), calling `sent` with each part's size as
        gRPC takes it; a scheduler without that call gets it in one CreateExperiment."""

        def chunks() -> Iterator[scheduler_pb2.UploadExperimentRequest]:
            for start in range(0, max(len(model_definition), 1), UPLOAD_CHUNK):
                part = model_definition[start : start + UPLOAD_CHUNK]
                head = start == 0
                yield scheduler_pb2.UploadExperimentRequest(
                    config_yaml=config_yaml if head else "",
                    model_definition_name=model_definition_name if head else "",
                    model_definition=part,
                    paused=paused and head,
                )
                if sent is not None:
                    sent(len(part))

        try:
            return self._stub.UploadExperiment(chunks(), timeout=_UPLOAD_TIMEOUT).experiment
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
        request = scheduler_pb2.CreateExperimentRequest(
            config_yaml=config_yaml,
            model_definition=model_definition,
            model_definition_name=model_definition_name,
            paused=paused,
        )
        return self._stub.CreateExperiment(request, timeout=_UPLOAD_TIMEOUT).experiment

    def list_experiments(self, page_size: int = LIST_PAGE) -> list[scheduler_pb2.Experiment]:
        """Every experiment, a page per call, so no reply grows with the number of experiments."""
        experiments: list[scheduler_pb2.Experiment] = []
        token = ""
        while True:
            request = scheduler_pb2.ListExperimentsRequest(page_size=page_size, page_token=token)
            reply = self._stub.ListExperiments(request, timeout=_TIMEOUT)
            experiments.extend(reply.experiments)
            token = reply.next_page_token
            if not token:
                return experiments

    def call(self, method: str, request: Any) -> Any:
        """A read-only RPC by name (pedl.jobs gathers the queue through it, as the REST API does)."""
        return self._read(getattr(self._stub, method), request, _TIMEOUT)

    def get_experiment(self, experiment_id: int) -> scheduler_pb2.GetExperimentResponse:
        request = scheduler_pb2.GetExperimentRequest(experiment_id=experiment_id)
        return self._read(self._stub.GetExperiment, request, _TIMEOUT)

    def wait_experiment(self, experiment_id: int, seconds: float) -> int:
        """Blocks up to `seconds`, returning early the moment the experiment ends; its state then.
        An older scheduler without WaitExperiment: a sleep, then a read."""
        if not self._wait_supported:
            time.sleep(seconds)
            return self.get_experiment(experiment_id).experiment.state
        request = scheduler_pb2.WaitExperimentRequest(experiment_id=experiment_id, timeout_seconds=seconds)
        try:
            return self._read(self._stub.WaitExperiment, request, seconds + _TIMEOUT).experiment.state
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
        self._wait_supported = False
        return self.wait_experiment(experiment_id, seconds)

    def kill_experiment(self, experiment_id: int) -> scheduler_pb2.Experiment:
        request = scheduler_pb2.KillExperimentRequest(experiment_id=experiment_id)
        return self._stub.KillExperiment(request, timeout=_TIMEOUT).experiment

    def patch_experiment(self, request: scheduler_pb2.PatchExperimentRequest) -> scheduler_pb2.Experiment:
        return self.patch(request).experiment

    def patch(self, request: scheduler_pb2.PatchExperimentRequest) -> scheduler_pb2.PatchExperimentResponse:
        # A GC policy change deletes checkpoints before answering: as long as a delete.
        return self._stub.PatchExperiment(request, timeout=_UPLOAD_TIMEOUT)

    def kill_trial(self, trial_id: int) -> scheduler_pb2.Trial:
        return self._stub.KillTrial(scheduler_pb2.KillTrialRequest(trial_id=trial_id), timeout=_TIMEOUT).trial

    def delete_experiment(self, experiment_id: int) -> int:
        request = scheduler_pb2.DeleteExperimentRequest(experiment_id=experiment_id)
        return int(self._stub.DeleteExperiment(request, timeout=_UPLOAD_TIMEOUT).deleted_checkpoints)

    def delete_checkpoints(self, uuids: list[str]) -> list[common_pb2.Checkpoint]:
        request = scheduler_pb2.DeleteCheckpointsRequest(checkpoint_uuids=uuids)
        return list(self._stub.DeleteCheckpoints(request, timeout=_UPLOAD_TIMEOUT).checkpoints)

    def remove_checkpoint_files(self, uuids: list[str], globs: list[str]) -> list[common_pb2.Checkpoint]:
        request = scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest(
            checkpoint_uuids=uuids, globs=globs
        )
        return list(self._stub.RemoveCheckpointFiles(request, timeout=_UPLOAD_TIMEOUT).checkpoints)

    def pause_experiment(self, experiment_id: int) -> scheduler_pb2.Experiment:
        request = scheduler_pb2.PauseExperimentRequest(experiment_id=experiment_id)
        return self._stub.PauseExperiment(request, timeout=_TIMEOUT).experiment

    def activate_experiment(self, experiment_id: int) -> scheduler_pb2.Experiment:
        request = scheduler_pb2.ActivateExperimentRequest(experiment_id=experiment_id)
        return self._stub.ActivateExperiment(request, timeout=_TIMEOUT).experiment

    def get_model_definition(self, experiment_id: int) -> scheduler_pb2.GetModelDefinitionResponse:
        request = scheduler_pb2.GetModelDefinitionRequest(experiment_id=experiment_id)
        return self._stub.GetModelDefinition(request, timeout=_UPLOAD_TIMEOUT)

    def get_trial(
        self, trial_id: int, page_size: int = 1000, group_figures: bool = False
    ) -> scheduler_pb2.GetTrialResponse:
        """The trial with all its steps, validations, checkpoints and custom metric groups (with
        `group_figures`, each metric's figures too), read a page of steps per call."""
        detail = scheduler_pb2.GetTrialResponse()
        token = ""
        while True:
            request = scheduler_pb2.GetTrialRequest(
                trial_id=trial_id, page_size=page_size, page_token=token, group_figures=group_figures
            )
            page = self._read(self._stub.GetTrial, request, _TIMEOUT)
            detail.trial.CopyFrom(page.trial)
            detail.steps.extend(page.steps)
            detail.validations.extend(page.validations)
            detail.checkpoints.extend(page.checkpoints)
            if not detail.timeline:  # the whole timeline comes with every page
                detail.timeline.extend(page.timeline)
            detail.metric_groups.extend(page.metric_groups)  # the first page's only
            token = page.next_page_token
            if not token:
                return detail

    def group_reports(self, trial_id: int, group: str) -> list[dict[str, Any]]:
        """Every stored report of one of the trial's custom metric groups, oldest first: its batches,
        metrics and end time."""
        request = scheduler_pb2.GetMetricsRequest(trial_id=trial_id, group=group)
        replies = self._read(self._stub.GetMetrics, request, _TIMEOUT)
        keep = ("total_batches", "metrics", "end_time")
        return [
            {k: r[k] for k in keep}
            for reply in replies
            for s in reply.series
            for r in records.metric_records(s)
        ]

    def trial_details(
        self, experiment_id: int, include_steps: bool = True, page: int = 0
    ) -> list[scheduler_pb2.GetTrialResponse]:
        """Every trial of the experiment with its validations, checkpoints (and steps), by trial id,
        a page per call."""
        details: list[scheduler_pb2.GetTrialResponse] = []
        after = 0
        while True:
            request = scheduler_pb2.ListTrialDetailsRequest(
                experiment_id=experiment_id, after_trial_id=after, limit=page, include_steps=include_steps
            )
            response = self._read(self._stub.ListTrialDetails, request, _TIMEOUT)
            details.extend(response.trials)
            if not response.next_after_trial_id:
                return details
            after = response.next_after_trial_id

    def get_cluster_info(self) -> scheduler_pb2.GetClusterInfoResponse:
        return self._stub.GetClusterInfo(scheduler_pb2.GetClusterInfoRequest(), timeout=_TIMEOUT)

    def get_master_config(self) -> scheduler_pb2.GetMasterConfigResponse:
        return self._stub.GetMasterConfig(scheduler_pb2.GetMasterConfigRequest(), timeout=_TIMEOUT)

    def trial_logs(
        self,
        trial_id: int,
        follow: bool = False,
        after_id: int = 0,
        tail: int = 0,
        patient: bool | None = None,
    ) -> Iterator[common_pb2.LogLine]:
        """Without follow the stream ends after the stored lines; with it, when the trial ends. A
        `patient` stream (by default a followed one) resumes after the last line it saw when the
        scheduler restarts. `tail`: only the newest that many stored lines (a scheduler from before
        GetTrialLogs.tail sends them all)."""
        patient = follow if patient is None else patient
        while True:
            request = scheduler_pb2.GetTrialLogsRequest(
                trial_id=trial_id, follow=follow, after_id=after_id, tail=tail
            )
            try:
                stream = self._stub.GetTrialLogs(
                    request, timeout=None if follow else _TIMEOUT, wait_for_ready=patient
                )
                for response in stream:
                    self._down_since = None
                    for line in response.lines:
                        after_id = max(after_id, line.id)
                        yield line
                return
            except grpc.RpcError as e:
                if not patient or e.code() not in _RETRIED or not self._still_waiting():
                    raise

    def trial_log_tail(
        self, trial_id: int, n: int, keep: Callable[[common_pb2.LogLine], bool], patient: bool = False
    ) -> tuple[list[common_pb2.LogLine], int]:
        """The newest `n` stored lines that `keep` accepts, and the id of the newest stored line (to
        follow after). The scheduler cuts the tail; when the lines it sent hold fewer than `n` kept
        ones (pedl's own lines are hidden) it is asked for four times as many, until the log's start.
        A scheduler from before GetTrialLogs.tail sends every line (more than asked for): the cut is
        then made here, from that one reply."""
        ask = min(max(n, 1), _MAX_TAIL)  # --tail 0 still needs the newest id
        while True:
            sent = list(self.trial_logs(trial_id, tail=ask, patient=patient))
            kept = [line for line in sent if keep(line)]
            if len(kept) >= n or len(sent) != ask or ask == _MAX_TAIL:
                return (kept[-n:] if n else []), max((line.id for line in sent), default=0)
            ask = min(ask * 4, _MAX_TAIL)

    def set_agent_enabled(self, agent_id: str, slot_id: str, enabled: bool) -> scheduler_pb2.Agent:
        request = scheduler_pb2.SetAgentEnabledRequest(agent_id=agent_id, slot_id=slot_id, enabled=enabled)
        return self._stub.SetAgentEnabled(request, timeout=_TIMEOUT).agent

    def list_agents(self) -> list[scheduler_pb2.Agent]:
        return list(self.list_cluster().agents)

    def list_cluster(self) -> scheduler_pb2.ListAgentsResponse:
        """The agents and the Slurm pools' pilot jobs (pending ones have no agent yet)."""
        return self._stub.ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=_TIMEOUT)


def connect(args: argparse.Namespace) -> SchedulerClient:
    """A client for the command's master; remembers the address so errors can name it."""
    args.master_address = resolve_master(getattr(args, "master", None))
    return SchedulerClient(args.master_address)
