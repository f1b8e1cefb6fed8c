"""Exit codes agents report for runs the infrastructure ended, which the scheduler reads as such."""

# The run's agent was stopped while the run ran (SIGTERM: a Slurm scancel, a walltime's end, a
# machine shutting down): the run restarts elsewhere without spending the trial's max_restarts.
AGENT_STOPPED_EXIT_CODE = 79
