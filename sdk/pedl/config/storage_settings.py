"""The `checkpoint_storage` section as the scheduler and the harness read it: a frozen, typed value
built once where the config is parsed (`parse_experiment_config`, `carried.from_json`,
`changes.with_changes` for a changed GC policy).

The scheduler reads the GC policy (`save_*`) for every checkpoint it records and the type to decide
which create-time check applies; the harness hands the section to the checkpoint store. Fields keep the
defaults in one place (`pedl.config.storage` fills them). `section` is the section as written (with
defaults): what the checkpoint store receives on the wire (its own protocol, a JSON object) and what
user code gets in `ExperimentConfig.raw["checkpoint_storage"]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pedl.config.section_view import SectionView


@dataclass(frozen=True, eq=False)
class CheckpointStorage(SectionView):
    type: str | None = None  # None: the cluster's checkpoint store backend decides where checkpoints go
    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1
    host_path: str | None = None  # shared_fs
    storage_path: str | None = None  # shared_fs
    bucket: str | None = None  # s3
    prefix: str | None = None  # s3
    endpoint_url: str | None = None  # s3
    section: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def wire(self) -> dict[str, Any]:
        """The section as the checkpoint store's API takes it (a copy the caller may keep)."""
        return dict(self.section)

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> CheckpointStorage:
        """From the validated section (`pedl.config.storage.validate_checkpoint_storage` filled its
        defaults)."""
        return cls(
            type=section.get("type"),
            save_experiment_best=section.get("save_experiment_best", 0),
            save_trial_best=section.get("save_trial_best", 1),
            save_trial_latest=section.get("save_trial_latest", 1),
            host_path=section.get("host_path"),
            storage_path=section.get("storage_path"),
            bucket=section.get("bucket"),
            prefix=section.get("prefix"),
            endpoint_url=section.get("endpoint_url"),
            section=dict(section),
        )
