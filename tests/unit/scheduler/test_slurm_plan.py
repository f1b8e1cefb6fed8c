"""What a Slurm pool submits and cancels for its queue (pure decisions), and its flags."""

from __future__ import annotations

import argparse
import re

import pytest

from pedl_scheduler.slurm import commands, options
from pedl_scheduler.slurm.plan import Demand, JobShape, PilotJob, Request, plan

CPU2 = JobShape(slots_per_node=2)


def demand(*slots: int, shape: JobShape = CPU2) -> list[Demand]:
    return [Demand(i + 1, s, shape) for i, s in enumerate(slots)]


def test_queued_single_slot_trials_are_packed_slots_per_node_to_a_job() -> None:
    decided = plan(demand(1, 1, 1), [], max_jobs=8)
    assert decided.submit == (Request(CPU2, 1), Request(CPU2, 1))
    assert decided.cancel == ()
    assert decided.waits_on == {1: None, 2: None, 3: None}


def test_a_gang_larger_than_a_node_gets_one_job_over_several_nodes() -> None:
    one_per_node = JobShape(slots_per_node=1)
    decided = plan(demand(2, shape=one_per_node), [], max_jobs=8)
    assert decided.submit == (Request(one_per_node, 2),)


def test_trials_wait_for_jobs_already_pending_instead_of_submitting_more() -> None:
    jobs = [PilotJob("7", CPU2, 1, "PENDING", "Resources")]
    decided = plan(demand(1, 1), jobs, max_jobs=8)
    assert decided.submit == () and decided.cancel == ()
    assert decided.waits_on == {1: "7", 2: "7"}


def test_free_slots_of_connected_pilots_count_before_new_jobs() -> None:
    jobs = [PilotJob("7", CPU2, 1, "RUNNING", free_slots=(1,))]
    assert plan(demand(1), jobs, max_jobs=8).submit == ()
    assert plan(demand(1, 1), jobs, max_jobs=8).submit == (Request(CPU2, 1),)


def test_a_pending_job_no_trial_needs_is_cancelled_but_running_pilots_are_left_to_exit_idle() -> None:
    jobs = [
        PilotJob("7", CPU2, 1, "PENDING", "Priority"),
        PilotJob("8", CPU2, 1, "RUNNING", free_slots=(2,)),
        PilotJob("9", None, 1, "PENDING"),  # an earlier scheduler's: not ours to judge
    ]
    assert plan([], jobs, max_jobs=8).cancel == ("7",)


def test_jobs_of_another_shape_do_not_serve_a_trial() -> None:
    gpu = JobShape(slots_per_node=2, gpu=True)
    jobs = [PilotJob("7", CPU2, 1, "PENDING")]
    decided = plan(demand(1, shape=gpu), jobs, max_jobs=8)
    assert decided.submit == (Request(gpu, 1),) and decided.cancel == ("7",)


def test_max_jobs_bounds_what_is_live_at_once() -> None:
    jobs = [PilotJob("7", CPU2, 1, "RUNNING", free_slots=(0,))]
    decided = plan(demand(2, 2, 2), jobs, max_jobs=2)
    assert len(decided.submit) == 1 and set(decided.waits_on) == {1}


def test_sbatch_asks_gpus_or_cpus_per_node_and_the_experiments_args_come_last() -> None:
    pilot = commands.Pilot("hpc", "gpuq", "10.0.0.1:8080", ("pedl-agent",), 60, 2, "/out", 120)
    gpu = JobShape(slots_per_node=4, gpu=True, gpu_type="a100", sbatch_args=("--time=01:00:00",))
    argv = commands.sbatch_argv(pilot, Request(gpu, 2))
    assert "--gres=gpu:a100:4" in argv and "--nodes=2" in argv and argv[-1] == "--time=01:00:00"
    assert "--signal=B:USR1@120" in argv
    cpu = commands.sbatch_argv(pilot, Request(CPU2, 1))
    assert "--cpus-per-task=4" in cpu and not any(a.startswith("--gres") for a in cpu)
    script = commands.batch_script(pilot, CPU2)
    assert "--slots 2" in script and "--exit-when-idle 60" in script and "srun --ntasks-per-node=1" in script
    assert commands.job_of_agent("slurm-42-n1") == "42" and commands.job_of_agent("agent0") is None


def parse(*argv: str) -> options.SlurmSettings:
    p = argparse.ArgumentParser()
    options.add_arguments(p)
    return options.from_args(p.parse_args(list(argv)))


def test_resource_pool_flags_name_slurm_partitions() -> None:
    settings = parse("--resource-pool", "hpc=slurm:batch", "--resource-pool", "gpus=slurm-gpu:a100")
    assert settings.pools == (
        options.SlurmPool("hpc", "batch", False),
        options.SlurmPool("gpus", "a100", True),
    )


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--resource-pool", "hpc"], "NAME=slurm:PARTITION"),
        (["--resource-pool", "hpc=pbs:batch"], "NAME=slurm:PARTITION"),
        (["--resource-pool", "a=slurm:x", "--resource-pool", "a=slurm:y"], "given twice"),
        (["--slurm-slots-per-node", "0"], "--slurm-slots-per-node must be >= 1"),
        (["--slurm-agent-command", ""], "--slurm-agent-command is empty"),
    ],
)
def test_bad_slurm_flags_are_refused_with_one_line(argv: list[str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse(*argv)


def test_the_walltime_signal_drains_each_nodes_agent_and_only_it() -> None:
    """USR1 (sbatch --signal) runs a step beside the agents that sends USR2 to the agent of this job
    on each node; a signal to the agents' step would reach their trials' processes too."""
    pilot = commands.Pilot("hpc", "q", "10.0.0.1:8080", ("pedl-agent",), 60, 1, "/out", 120)
    script = commands.batch_script(pilot, CPU2)
    assert "trap 'kill -TERM $step' TERM" in script  # scancel: stop now
    (trap,) = [line for line in script.splitlines() if line.endswith(" USR1")]
    assert "srun --overlap --ntasks-per-node=1" in trap and "pkill -USR2 -f --" in trap
    found = re.search(r'-- "(.+?)"', trap)
    assert found is not None
    pattern = found.group(1).replace("$SLURM_JOB_ID", "42")
    assert re.search(pattern, "/venv/bin/pedl-agent --master m:1 --agent-id slurm-42-n1")
    assert not re.search(pattern, "/venv/bin/pedl-agent --master m:1 --agent-id slurm-421-n1")
    assert not re.search(pattern, f"pkill -USR2 -f -- {pattern}")  # not the step's own processes
