"""Slurm resource pools: the scheduler submits pilot `pedl-agent` jobs sized to a pool's queue.

`plan.py` decides what to submit and cancel (pure); `commands.py` speaks to Slurm's clients;
`options.py` reads the scheduler's flags; `service.py` ties them to the scheduler's state.
"""
