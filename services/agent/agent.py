"""What the agent does with each scheduler message; no networking here beyond the runs it starts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from pedl.v1 import agent_pb2, common_pb2

from .version import AGENT_PROTOCOL, AGENT_VERSION


class RunLike(Protocol):
    """What the agent needs of a trial run (`TrialRun`; fakes in tests)."""

    start: agent_pb2.StartTrial
    # Set when the agent itself stops (SIGTERM: scancel, walltime, shutdown): the exit is the
    # infrastructure's, not the trial's.
    stopped_by_infrastructure: bool

    def add_workload(self, workload: common_pb2.Workload) -> bool: ...

    @property
    def busy(self) -> bool: ...

    @property
    def waiting(self) -> bool:
        """Whether the run still waits for the runs it takes its slots from (`run(after)`)."""
        ...

    def kill(self, by_scheduler: bool = True, reason: str = "") -> None: ...

    async def run(self, after: Sequence[asyncio.Future[None]] = ()) -> None:
        """Runs to the end; the harness starts only once every run in `after` has ended."""
        ...


class Agent:
    """Keeps the live trial runs, keyed by (trial_id, run_id), and routes scheduler messages to them.

    `run_factory(start)` builds a run (normally `TrialRun(start, settings)`); its `run()` coroutine
    lives until the harness is gone and reports the exit itself.

    Handoffs: a StartTrial whose `after` names runs still here takes over their slots as they exit.
    The scheduler sends it as soon as those runs were told to terminate, so the slot passes from one
    trial to the next here, without waiting for the exit to reach the scheduler and a start to come
    back; the new run fetches its model definition and takes its workloads meanwhile.
    """

    def __init__(
        self,
        agent_id: str,
        slots: list[common_pb2.Slot],
        hostname: str,
        address: str,
        resource_pool: str,
        run_factory: Callable[[agent_pb2.StartTrial], RunLike],
        result_pending: Callable[[int, int], bool] = lambda trial_id, run_id: False,
        environments: list[str] | None = None,
        isolation: str = "none",
        label: str = "",
    ) -> None:
        self.agent_id = agent_id
        self.slots = slots
        self.hostname = hostname
        self.address = address
        self.resource_pool = resource_pool
        self._run_factory = run_factory
        self._result_pending = result_pending
        # The Python environments (by name) trials may ask for; "default" always.
        self.environments = environments or ["default"]
        self.isolation = isolation
        self.label = label
        self.runs: dict[tuple[int, int], RunLike] = {}
        self._tasks: dict[tuple[int, int], asyncio.Task[None]] = {}
        self._log = structlog.get_logger(agent_id=agent_id)
        self.shutting_down = False

    def register_message(self) -> agent_pb2.ConnectRequest:
        return agent_pb2.ConnectRequest(
            register=agent_pb2.RegisterAgent(
                agent_id=self.agent_id,
                slots=self.slots,
                hostname=self.hostname,
                address=self.address,
                environments=self.environments,
                resource_pool=self.resource_pool,
                isolation=self.isolation,
                label=self.label,
                running_trials=[
                    agent_pb2.RunningTrial(
                        trial_id=t,
                        run_id=r,
                        slot_ids=list(run.start.slot_ids),
                        busy=run.busy or self._result_pending(t, r),
                        waiting=run.waiting,
                    )
                    for (t, r), run in sorted(self.runs.items())
                ],
                version=AGENT_VERSION,
                protocol=AGENT_PROTOCOL,
                accepts_handoffs=True,
            )
        )

    def handle(self, message: agent_pb2.ConnectResponse) -> None:
        kind = message.WhichOneof("message")
        if kind == "start_trial":
            self.start_trial(message.start_trial)
        elif kind == "run_workload":
            self.run_workload(message.run_workload.workload)
        elif kind == "kill_trial":
            self.kill_trial(message.kill_trial.trial_id, message.kill_trial.run_id)
        elif kind == "registered":
            pass  # the link handles it
        else:
            self._log.warning("ignoring an unknown message from the scheduler", kind=kind)

    def start_trial(self, start: agent_pb2.StartTrial) -> None:
        key = (start.trial_id, start.run_id)
        if self.shutting_down:
            self._log.warning("refusing start_trial while shutting down", trial_id=key[0], run_id=key[1])
            return
        if key in self.runs:
            self._log.info("start_trial for a run already here; ignored", trial_id=key[0], run_id=key[1])
            return
        for (t, r), old in list(self.runs.items()):
            if t == start.trial_id:
                self._log.info("a newer run replaces this trial's run", trial_id=t, old_run=r, run_id=key[1])
                old.kill(by_scheduler=True, reason=f"replaced by run {start.run_id}")
        keys = [(r.trial_id, r.run_id) for r in start.after]
        after = [self._slot_released(k) for k in keys if k in self._tasks]
        run = self._run_factory(start)
        self.runs[key] = run
        self._log.info(
            "starting trial",
            trial_id=key[0],
            run_id=key[1],
            experiment_id=start.experiment_id,
            after=[(r.trial_id, r.run_id) for r in start.after],
        )
        task = asyncio.get_running_loop().create_task(self._run(key, run, after))
        self._tasks[key] = task

    def _slot_released(self, key: tuple[int, int]) -> asyncio.Future[None]:
        """When the run `key` lets go of its slots: its own `slot_released` where it has one, else its end."""
        released = getattr(self.runs.get(key), "slot_released", None)
        return released if released is not None else self._tasks[key]

    async def _run(self, key: tuple[int, int], run: RunLike, after: Sequence[asyncio.Future[None]]) -> None:
        try:
            await run.run(after)
        except Exception:
            self._log.exception("trial run crashed", trial_id=key[0], run_id=key[1])
        finally:
            if self.runs.get(key) is run:
                del self.runs[key]
                self._tasks.pop(key, None)

    def run_workload(self, workload: common_pb2.Workload) -> None:
        run = self.runs.get((workload.trial_id, workload.run_id))
        if run is None or not run.add_workload(workload):
            self._log.warning(
                "dropping a workload for a run not running here",
                trial_id=workload.trial_id,
                run_id=workload.run_id,
                kind=common_pb2.WorkloadKind.Name(workload.kind),
            )

    def kill_trial(self, trial_id: int, run_id: int) -> None:
        """Kills that run; run_id 0 kills every run of the trial."""
        targets = [r for (t, rid), r in self.runs.items() if t == trial_id and run_id in (0, rid)]
        if not targets:
            self._log.info("kill_trial for a run not running here", trial_id=trial_id, run_id=run_id)
        for run in targets:
            run.kill(by_scheduler=True)

    async def shutdown(self, reason: str) -> None:
        """Kills every run and waits until each has exited (and reported it)."""
        self.shutting_down = True
        for run in list(self.runs.values()):
            run.stopped_by_infrastructure = True
            run.kill(by_scheduler=False, reason=reason)
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
