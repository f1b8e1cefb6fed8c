"""`python -m pedl.harness`: runs one trial for the agent, then exits (0 on TERMINATE, 1 on error)."""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

from pedl import _log
from pedl._metrics import from_struct
from pedl._parent_death import die_with_agent
from pedl.config import ExperimentConfig
from pedl.harness import incompatibility, timeline
from pedl.harness._exit import flush_and_exit, skip_teardown_finalizers
from pedl.harness.agent_client import AgentWorkloadSource, StoreCheckpoints
from pedl.harness.build import start_trial
from pedl.harness.controller import TrialController
from pedl.harness.core_api_trial import ScriptFailed
from pedl.harness.distributed import (
    PEER_FAILED_EXIT_CODE,
    Launch,
    ProcessGroup,
    is_peer_failure,
    launch_from_env,
    start_framework,
)
from pedl.harness.epoch import epoch_length, refusal_signature
from pedl.harness.failure import failure_signature, is_invalid_hp
from pedl.harness.hparams import typed_hparams
from pedl.harness.process_limits import apply_pids_limit
from pedl.harness.script_run import is_command, run_script
from pedl.harness.store_retry import STORE_UNAVAILABLE_EXIT_CODE, StoreUnavailable
from pedl.harness.tensorboard_sync import (
    TENSORBOARD_ENV,
    SyncingSource,
    TensorboardUploader,
    final_sync,
    run_directories,
)
from pedl.harness.trial_config import InvalidTrialConfig, invalid_config_signature, load_trial_config
from pedl.harness.workloads import run_workloads

SOCKET_ENV = "PEDL_HARNESS_SOCKET"


def _start_distributed(
    group: ProcessGroup,
    model_dir: Path,
    config: ExperimentConfig,
    hparams: dict[str, Any],
    seed: int,
    checkpoint_uuid: str,
    checkpoints: StoreCheckpoints,
    warm_start: bool = False,
) -> TrialController:
    """Every rank builds the trial; one rank per machine downloads the checkpoint for all of them.

    A framework with a multi-worker runtime of its own (Keras) starts it from the trial class once
    the model definition is imported (`start_framework`)."""
    group.start()
    restore_dir = None
    if checkpoint_uuid:
        # The trial's directory (the model definition's parent) is this machine's own.
        restore_dir = group.fetch_shared(checkpoints, checkpoint_uuid, model_dir.parent)
    controller = start_trial(
        model_dir,
        config,
        hparams,
        seed,
        restore_dir,
        group.once_per_machine,
        before_build=lambda model_def: start_framework(model_def.trial_class, group),
        warm_start=warm_start,
    )
    if restore_dir is not None:
        group.release_shared(restore_dir)
    return controller


def run(socket_path: str, launch: Launch | None = None) -> int:
    """Runs the trial; with a `launch` (slots_per_trial > 1) as one rank of its process group.
    Returns the exit code (a command entrypoint's script's own)."""
    source: Any = AgentWorkloadSource(socket_path)
    model_dir: Path | None = None
    uploader: TensorboardUploader | None = None
    try:
        info = source.trial_info()
        trial = info.trial
        parsed = load_trial_config(trial.config_json)
        config = parsed.raw
        hparams = typed_hparams(from_struct(trial.hparams), config)
        checkpoints = StoreCheckpoints(
            trial.checkpoint_store_address,
            trial.experiment_id,
            trial.trial_id,
            parsed.checkpoint_storage.wire(),
        )
        trial_dir = Path(info.model_definition_dir or os.getcwd()).parent
        os.environ[TENSORBOARD_ENV] = str(run_directories(trial_dir)[0])
        tensorboard = TensorboardUploader(run_directories(trial_dir), checkpoints.store_tensorboard_files)
        if launch is None or launch.is_chief:  # it sends its machine's files, its other ranks' included
            uploader = tensorboard
            source = SyncingSource(source, uploader)
        if is_command(parsed):
            try:
                code = run_script(source, info, parsed, hparams, checkpoints, launch, tensorboard=tensorboard)
                if uploader is not None:
                    final_sync(uploader, failing=code != 0)
                return code
            finally:
                checkpoints.close()
        model_dir = Path(info.model_definition_dir or os.getcwd())
        if launch is not None:
            group = ProcessGroup(launch)
            controller = _start_distributed(
                group,
                model_dir,
                parsed,
                hparams,
                trial.trial_seed,
                trial.latest_checkpoint_uuid or trial.warm_start_checkpoint_uuid,
                checkpoints,
                warm_start=not trial.latest_checkpoint_uuid and bool(trial.warm_start_checkpoint_uuid),
            )
            if launch.is_chief and parsed.needs_trial_epoch_length:
                source.report_epoch_length(epoch_length(controller))
            try:
                run_workloads(controller, group.workloads(source), group.checkpoints(checkpoints))
                if uploader is not None:
                    final_sync(uploader, failing=False)
            finally:
                checkpoints.close()
            group.finish()
            return 0
        with tempfile.TemporaryDirectory(prefix="pedl-restore-") as tmp:
            restore_dir = None
            restore_uuid = trial.latest_checkpoint_uuid or trial.warm_start_checkpoint_uuid
            if restore_uuid:
                restore_dir = Path(tmp)
                with timeline.phase("checkpoint download"):
                    checkpoints.fetch(restore_uuid, restore_dir)
            controller = start_trial(
                model_dir,
                parsed,
                hparams,
                trial.trial_seed,
                restore_dir,
                warm_start=not trial.latest_checkpoint_uuid and bool(trial.warm_start_checkpoint_uuid),
            )
        if parsed.needs_trial_epoch_length:
            source.report_epoch_length(epoch_length(controller))
        try:
            run_workloads(controller, source, checkpoints)
            if uploader is not None:
                final_sync(uploader, failing=False)
        finally:
            getattr(checkpoints, "close", lambda: None)()
        return 0
    except Exception as exc:
        if uploader is not None and _exit_code(exc) != STORE_UNAVAILABLE_EXIT_CODE:
            # What the trial wrote before it failed, shown beside its error.
            final_sync(uploader, failing=True)
        failure = refusal_signature(exc)
        if failure is None:
            failure = invalid_config_signature(exc)
        if failure is None and model_dir is not None:
            failure = failure_signature(exc, model_dir)
        if failure is not None:
            source.report_failure(failure)
        raise
    finally:
        source.close()


def _exit_code(exc: BaseException) -> int:
    """1 for the trial's own failure; STORE_UNAVAILABLE_EXIT_CODE when the checkpoint store stayed
    unreachable (the scheduler then waits for it without spending `max_restarts`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StoreUnavailable):
            return STORE_UNAVAILABLE_EXIT_CODE
        seen = seen.__cause__ or seen.__context__
    return 1


def main() -> int:
    die_with_agent()  # first: a harness whose agent dies exits in every phase, this one included
    apply_pids_limit()  # before any trial code: pedl-agent --trial-pids-limit
    socket_path = os.environ.get(SOCKET_ENV)
    if not socket_path:
        print(f"pedl.harness: environment variable {SOCKET_ENV} is not set", file=sys.stderr)
        return 2
    started = timeline.process_started()
    if started is not None:
        timeline.record("imports", started)
    _log.configure_logging("harness")
    launch = None
    try:
        launch = launch_from_env()
        code = run(socket_path, launch)
    except Exception as exc:
        code = _exit_code(exc)
        if isinstance(exc, (ScriptFailed, InvalidTrialConfig)):  # one line says it all
            print(f"pedl.harness: {exc}", file=sys.stderr)
        elif is_invalid_hp(exc):  # the scheduler ends the trial early (INVALID_HP), not as a failure
            print(f"pedl.harness: det.InvalidHP: {exc}; the trial ends early (INVALID_HP)", file=sys.stderr)
        elif code == STORE_UNAVAILABLE_EXIT_CODE:
            print(f"pedl.harness: the checkpoint store is unavailable: {exc}", file=sys.stderr)
        elif not incompatibility.report(exc):  # a known one: its line, the traceback in the log
            traceback.print_exc()
        sys.stderr.flush()
        if launch is not None:
            # A rank that only lost a peer says so, so that the agent reports the peer's error; and
            # it skips interpreter teardown, which can hang or abort on a broken process group.
            sys.stdout.flush()
            os._exit(PEER_FAILED_EXIT_CODE if is_peer_failure(exc) else code)
        return code
    if launch is not None:
        # The process group is already torn down (after a barrier); interpreter teardown with gloo's
        # threads still around can abort (SIGABRT) a run that completed, so skip it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def exit_now(code: int) -> None:
    """Ends the harness as interpreter shutdown would (non-daemon threads joined, atexit hooks run,
    output flushed) but without tearing down every module: with torch loaded that teardown takes
    a good part of a second, while the slot waits for the exit. torch's own at-exit finalizers,
    which only unregister kernels from its dispatcher, are skipped too (`skip_teardown_finalizers`)."""
    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon:
            thread.join()
    try:
        skip_teardown_finalizers()
        atexit._run_exitfuncs()
    finally:
        flush_and_exit(code)
