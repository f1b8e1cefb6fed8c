"""What every Determined Trial API context offers (hyperparameters, config, ranks), framework-free."""

from __future__ import annotations

from typing import Any

from pedl import _log, _trial_context


class DistributedContext:
    """Ranks of the trial's process group (pedl runs one process per slot)."""

    def __init__(self, rank: int = 0, size: int = 1) -> None:
        self.rank = rank
        self.size = size

    def get_rank(self) -> int:
        return self.rank

    def get_size(self) -> int:
        return self.size

    # Ranks count every slot of the trial; pedl gangs a trial's slots onto agents in rank order.
    def get_local_rank(self) -> int:
        return self.rank

    def get_local_size(self) -> int:
        return self.size

    def get_cross_rank(self) -> int:
        return 0

    def get_cross_size(self) -> int:
        return 1


class TrialContext:
    """Hyperparameters and config of the running trial, as Determined's contexts expose them."""

    def __init__(
        self,
        hparams: dict[str, Any],
        experiment_config: dict[str, Any],
        distributed: DistributedContext | None = None,
    ) -> None:
        self._hparams = dict(hparams)
        self._config = dict(experiment_config)
        self.distributed = distributed or DistributedContext()
        self._stop_requested = False

    @classmethod
    def for_running_trial(cls, hparams: dict[str, Any], distributed: DistributedContext | None = None) -> Any:
        return cls(hparams, _trial_context.get_experiment_config(), distributed)

    def get_hparams(self) -> dict[str, Any]:
        return dict(self._hparams)

    def get_hparam(self, name: str) -> Any:
        if name not in self._hparams:
            known = ", ".join(sorted(self._hparams)) or "(none)"
            raise ValueError(f"get_hparam({name!r}): no such hyperparameter; the experiment defines: {known}")
        return self._hparams[name]

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ends the trial early, as Determined does: the step (or validation) in progress finishes,
        the trial is checkpointed and ends COMPLETED, and the searcher hears that it exited early
        (USER_REQUESTED_STOP); the experiment's other trials go on. Decided by the chief (rank 0)."""
        if not isinstance(stop_requested, bool):
            raise TypeError(f"set_stop_requested() takes a bool, got {type(stop_requested).__name__}")
        if stop_requested and not self._stop_requested:
            _log.get_logger(component="trial").info(
                "the trial asked to stop: it ends after the current step, with a checkpoint"
            )
        self._stop_requested = stop_requested

    def get_stop_requested(self) -> bool:
        return self._stop_requested

    def get_experiment_config(self) -> dict[str, Any]:
        return dict(self._config)

    def get_data_config(self) -> dict[str, Any]:
        return dict(self._config.get("data") or {})

    def get_global_batch_size(self) -> int:
        if "global_batch_size" not in self._hparams:
            raise ValueError(
                "get_global_batch_size(): the experiment config has no 'global_batch_size' hyperparameter, "
                "which Determined's Trial APIs require"
            )
        return int(self._hparams["global_batch_size"])

    def get_per_slot_batch_size(self) -> int:
        size = self.get_global_batch_size()
        slots = self.distributed.get_size()
        if size < slots:
            raise ValueError(f"global_batch_size {size} is smaller than the {slots} slots of this trial")
        return size // slots

    def get_trial_seed(self) -> int:
        try:
            return _trial_context.get_trial_seed()
        except RuntimeError:
            return 0

    def get_trial_id(self) -> int:
        return 0

    def get_experiment_id(self) -> int:
        return 0
