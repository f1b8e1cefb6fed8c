"""An experiment's life as its user drives it: create (with the checks that refuse what could never
run), kill, pause, activate, and its end once no trial is left."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import structlog

from pedl._timeutil import utc_now
from pedl.config import ConfigError, ExperimentConfig, carried, image_environments, parse_experiment_config
from pedl.searcher import make_search_method
from pedl_scheduler import scheduling
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import failures, machine, machine_views
from pedl_scheduler.experiments.effects import Emit
from pedl_scheduler.experiments.errors import NotFound, UserError
from pedl_scheduler.experiments.scheduling_pass import scheduling_agent
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.experiments.warm_start import resolve_source
from pedl_scheduler.request_limits import LimitExceeded
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.scheduling.labels import check_label, offered_keys, placement_key
from pedl_scheduler.scheduling.placement import PoolSlots
from pedl_scheduler.scheduling.slot_types import by_slot_type, could_ever_fit
from pedl_scheduler.searcher_journal import SearcherJournal
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_server_auth import ANONYMOUS, Principal

log = structlog.get_logger(component="experiments")


class ExperimentLifecycle:
    def __init__(self, state: SchedulerState, work: UnitOfWork, emit: Emit) -> None:
        self.state = state
        self.work = work
        self.emit = emit  # the machine's effects and the searcher's first operations, carried out
        self.db = state.db
        self.experiments = state.experiments
        self.trials = state.trials

    def create_experiment(
        self,
        config_yaml: str | ExperimentConfig,
        model_definition: bytes,
        name: str,
        owner: str = "",
        requester: Principal = ANONYMOUS,
        warnings: list[str] | None = None,
    ) -> int:
        """`config_yaml`: the user's YAML, or the config the API already parsed from it (parsed once).
        `warnings`: given (Determined's REST API), a trial no connected agent can hold is queued, as
        Determined's master queues it (agents may join), and why it waits is appended there."""
        limits = self.state.request_limits
        try:
            if isinstance(config_yaml, ExperimentConfig):
                config = config_yaml
            else:
                limits.check_config_size(config_yaml)
                config = parse_experiment_config(config_yaml)
            limits.check_config(config)
        except LimitExceeded as e:
            raise UserError(str(e)) from e
        except ConfigError as e:
            raise UserError(f"invalid experiment config: {e}") from e
        config = image_environments.resolve(config, self.state.image_rules)
        if not model_definition:
            raise UserError("the model definition is empty: submit a context directory holding the code")
        limit = self.state.model_definition_limit
        if len(model_definition) > limit:
            raise UserError(
                f"the model definition is {len(model_definition) / 2**20:.1f} MiB compressed, over the "
                f"scheduler's limit of {limit / 2**20:.0f} MiB (--model-definition-limit-mb raises it); "
                "leave large files out with .pedlignore"
            )
        if not name.isidentifier():
            raise UserError(f"model_definition_name {name!r} is not a valid Python identifier")
        agents = self.state.cluster.agents
        check_environment(agents, config.environment_name)
        check_agent_label(agents, config)
        try:
            check_fits(agents, config)
        except UserError as e:
            if warnings is None:
                raise
            warnings.append(f"{e}; the experiment is queued until agents that can hold it join")
        warm_start = resolve_source(self.db, config, requester)
        seed = config.experiment_seed if config.experiment_seed is not None else random.randrange(2**31)
        searcher = make_search_method(config, seed)
        with self.work.transaction():
            exp_id = self._insert_experiment(config, model_definition, name, seed, owner, warm_start)
            exp = ExperimentRuntime(
                exp_id, config, searcher, journal=SearcherJournal(searcher), warm_start_uuid=warm_start
            )
            self.experiments[exp_id] = exp
            self.emit(exp, [], [machine.SearcherDecided(exp.journal.call("initial_operations"))])
        log.info("experiment created", experiment_id=exp_id, searcher=config.searcher_name)
        for line in warnings or []:
            log.warning("experiment queued", experiment_id=exp_id, why=line)
        self.state.wake.set()
        return exp_id

    def _insert_experiment(
        self, config: Any, model_definition: bytes, name: str, seed: int, owner: str, warm_start: str = ""
    ) -> int:
        exp_id = experiment_ops.create_experiment(
            self.db,
            config_yaml=config.masked_yaml(),
            config_json=carried.stored_json(config),
            model_definition=model_definition,
            model_definition_name=name,
            seed=seed,
            created_at=utc_now(),
            owner=owner,
            warm_start_checkpoint_uuid=warm_start,
        )
        self.db.flush()
        return exp_id

    def kill_experiment(self, exp_id: int) -> None:
        if experiment_ops.experiment_state(self.db, exp_id) is None:
            raise NotFound(f"experiment {exp_id} not found")
        exp = self.experiments.get(exp_id)
        if exp is None:
            return  # already ended
        trials = [t for t in self._live_trials(exp) if not t.terminal]
        self._handle(exp, trials, machine.ExperimentKillRequested())
        self.state.notify()

    def kill_trial(self, trial_id: int) -> None:
        """Stops one trial for good: it ends CANCELED (once its run exits, if it has one) and the
        searcher hears it exited early, so the search goes on without it."""
        state = trial_ops.trial_state(self.db, trial_id)
        if state is None:
            raise NotFound(f"trial {trial_id} not found")
        trial = self.trials.get(trial_id)
        if trial is None or trial.terminal:
            raise UserError(f"trial {trial_id} has already ended ({state})")
        self._handle(self.experiments[trial.experiment_id], [trial], machine.TrialKillRequested(trial_id))

    def _handle(self, exp: ExperimentRuntime, trials: list[TrialRuntime], event: machine.Event) -> None:
        """One user request through the state machine, its effects in one transaction."""
        state, effects = machine.handle(machine_views.experiment_view(exp, trials), event)
        machine_views.absorb(exp, {t.id: t for t in trials}, state)
        with self.work.transaction():
            self.emit(exp, trials, effects)

    def reconfigure(self, exp_id: int, config: Any) -> None:
        """The live experiment runs on under `config` (already stored)."""
        exp = self.experiments.get(exp_id)
        if exp is not None:
            exp.config = config
            exp.start_config = None
            self.state.wake.set()  # a new cap, weight or priority may change what runs

    def pause_experiment(self, exp_id: int) -> None:
        exp = self._live_experiment(exp_id)
        self._handle(exp, self._live_trials(exp), machine.PauseRequested())
        self.state.notify()

    def revivable(self, exp_id: int) -> bool:
        """Whether activate means reviving an ended ERROR experiment (`Revival`), not resuming one."""
        return exp_id not in self.experiments and experiment_ops.experiment_state(self.db, exp_id) == "ERROR"

    def activate_experiment(self, exp_id: int) -> None:
        exp = self._live_experiment(exp_id)
        self._handle(exp, self._live_trials(exp), machine.ActivateRequested())

    def record_state(self, exp: ExperimentRuntime, state: str) -> None:
        """The experiment's state row (PAUSED, ACTIVE); a killed one's is written when it ends."""
        exp.state = state
        if state != "CANCELED":
            experiment_ops.set_experiment_state(self.db, exp.id, state)
            self.db.flush()

    def _live_experiment(self, exp_id: int) -> ExperimentRuntime:
        state = experiment_ops.experiment_state(self.db, exp_id)
        if state is None:
            raise NotFound(f"experiment {exp_id} not found")
        exp = self.experiments.get(exp_id)
        if exp is None:
            raise UserError(f"experiment {exp_id} has already ended ({state})")
        return exp

    def _live_trials(self, exp: ExperimentRuntime) -> list[TrialRuntime]:
        return [self.trials[t] for t in exp.trial_ids if t in self.trials]

    def ending(self, exp: ExperimentRuntime) -> tuple[str, str] | None:
        """How the experiment ends now (state, error): once it has no live trial and its search is
        over, or once it was killed; None while it goes on (or when it already ended)."""
        if exp.id not in self.experiments:
            return None
        settled = not exp.live and exp.state != "CANCELED" and exp.searcher_done
        states = trial_ops.trial_states_of(self.db, exp.id) if settled else []
        end = machine.experiment_end(exp.state, len(exp.live), exp.searcher_done, exp.searcher_failed, states)
        if end is None:
            return None
        state, error = end
        if state == "ERROR":  # the first failing trial's cause, so `describe` and the web UI say why
            first = trial_ops.first_trial_error(self.db, exp.id)
            if first is not None and first[1].strip():
                error += f"; the first, trial {first[0]}: {failures.cause_line(first[1])}"
        return state, error

    def end(self, exp: ExperimentRuntime, state: str, error: str) -> None:
        """The experiment's row says how it ended; it leaves the live ones (after its garbage collection)."""
        self._end_experiment(exp.id, state, error)
        del self.experiments[exp.id]
        log.info("experiment ended", experiment_id=exp.id, state=state)

    def _end_experiment(self, exp_id: int, state: str, error: str) -> None:
        experiment_ops.end_experiment(self.db, exp_id, state, error, utc_now())
        self.db.flush()


def check_environment(agents: Mapping[str, AgentHandle], name: str | None) -> list[str]:
    """The connected agents that can start the Python environment `name`. One no connected agent
    offers could never run (checked, like slots, only while agents are connected, so that
    experiments may be queued before agents join: with none, none are named and nothing is refused)."""
    if not name or name == "default":
        return sorted(agents)
    able = sorted(a.id for a in agents.values() if name in a.environments)
    if agents and not able:
        offered = sorted({e for a in agents.values() for e in a.environments})
        raise UserError(
            f"environment {name!r} is not offered by any connected agent; they offer: "
            f"{', '.join(offered)} (agents offer more with --environment {name}=/path/to/python)"
        )
    return able


def check_agent_label(agents: Mapping[str, AgentHandle], config: Any) -> None:
    """A label no connected agent of the trial's pool carries could never run (checked, like
    environments, only while agents of the pool are connected)."""
    label = config.resources.agent_label
    if label and (why := check_label(label)):
        raise UserError(f"resources.agent_label {label!r}: {why}")
    pool = config.resources.resource_pool or scheduling.DEFAULT_POOL
    in_pool = [a for a in agents.values() if a.resource_pool == pool]
    if not in_pool or any(a.label == label for a in in_pool):
        return
    labels = ", ".join(sorted({a.label for a in in_pool if a.label})) or "none"
    if label:
        raise UserError(
            f"resources.agent_label {label!r}: no connected agent of pool {pool!r} has that label (their "
            f"labels: {labels}); start one with `pedl-agent --label {label}`"
        )
    raise UserError(
        f"every connected agent of pool {pool!r} has a label ({labels}) and runs only trials asking for "
        "it: set resources.agent_label"
    )


def check_fits(agents: Mapping[str, AgentHandle], config: Any) -> None:
    """A trial no arrangement of the connected agents could ever hold is refused up front."""
    pool = config.resources.resource_pool or scheduling.DEFAULT_POOL
    name = config.environment_name or scheduling.DEFAULT_ENVIRONMENT
    environment = placement_key(name, config.resources.agent_label)
    in_pool = [a for a in agents.values() if a.resource_pool == pool]
    if not in_pool:
        return  # agents may still join
    slots = config.slots_per_trial
    shape = [scheduling_agent(a, free_slots=()) for a in in_pool]
    if could_ever_fit(shape, slots, environment):
        return
    eligible = [a for a in in_pool if environment in offered_keys(a.environments, a.label)]
    if PoolSlots(shape).could_ever_fit(slots, environment):  # it would, were GPU and CPU slots one kind
        groups = by_slot_type([a for a in shape if environment in a.environments])
        offered = "; ".join(
            f"{kind or 'untyped'} slots: at most {max((len(a.slot_ids) for a in group), default=0)} on "
            f"one agent, {sum(len(a.slot_ids) for a in group)} in all"
            for kind, group in groups
        )
        raise UserError(
            f"resources.slots_per_trial is {slots}, but the {len(eligible)} agents of pool {pool!r} "
            f"offering environment {name!r} cannot hold it with slots of one type ({offered}): a "
            "trial's slots are all GPUs or all CPU slots, never both, on one agent or on whole agents "
            "of one size"
        )
    sizes = ", ".join(str(len(a.slots)) for a in eligible) or "no"
    total = sum(len(a.slots) for a in eligible)
    raise UserError(
        f"resources.slots_per_trial is {slots}, but the {len(eligible)} agents of pool {pool!r} "
        f"offering environment {name!r} (with {sizes} slots, {total} in all) cannot hold "
        "it: a trial takes slots on one agent, or whole agents of one size"
    )
