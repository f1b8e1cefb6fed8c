"""The `environment` section as the scheduler, the agent and local mode read it: a frozen, typed value
built once where the config is parsed (`parse_experiment_config`, `carried.from_json`).

The scheduler places trials by the environment's name (agents offer named Python environments); the
agent starts every harness process with its variables, on CPU or GPU slots. Determined writes the
section as a string (the name) or a mapping (`name`/`python`, `environment_variables` as a list or by
device type); this resolves both forms once, so no reader tells them apart again. The section as
written stays `ExperimentConfig.raw["environment"]`, what user code receives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Environment:
    name: str | None = None  # None: the cluster's default environment
    # `NAME=value` items in order (later ones win) for trials on CPU slots and on GPU slots.
    cpu_variables: tuple[str, ...] = ()
    gpu_variables: tuple[str, ...] = ()
    # `image` as written: one name, or per device type (the CPU one first); pedl pulls none, but a
    # scheduler may map them to an environment (`pedl.config.image_environments`).
    images: tuple[str, ...] = ()

    def variables(self, *, gpu: bool) -> dict[str, str]:
        """The variables for a trial on GPU slots (`gpu`) or CPU slots, later entries winning."""
        out: dict[str, str] = {}
        for item in self.gpu_variables if gpu else self.cpu_variables:
            name, _, value = item.partition("=")
            out[name] = value
        return out

    @classmethod
    def of(cls, section: str | dict[str, Any] | None) -> Environment:
        """From the validated section (`pedl.config.sections.validate_environment`), or None."""
        if section is None or isinstance(section, str):
            return cls(name=section)
        value = section.get("environment_variables")
        if isinstance(value, dict):  # by device type; `gpu` is Determined's alias of `cuda`
            cpu = [str(item) for item in value.get("cpu") or []]
            gpu = [str(item) for key in ("cuda", "gpu") for item in value.get(key) or []]
        else:
            cpu = gpu = [str(item) for item in value or []]
        image = section.get("image")
        if isinstance(image, dict):  # the CPU image first: pedl's trials mostly run on CPU slots
            images = [str(v) for k, v in sorted(image.items(), key=lambda kv: kv[0] != "cpu") if v]
        else:
            images = [image] if image else []
        return cls(
            name=section.get("name") or section.get("python"),
            cpu_variables=tuple(cpu),
            gpu_variables=tuple(gpu),
            images=tuple(images),
        )
