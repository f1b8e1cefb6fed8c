"""TensorFlowTrial and EstimatorTrial train in one process: several slots is a clear error, not
N processes each silently training on all the data."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pedl.harness.distributed import Launch, start_framework
from pedl.pytorch import PyTorchTrial
from pedl.tensorflow import EstimatorTrial, TensorFlowTrial


def group(world_size: int) -> SimpleNamespace:
    return SimpleNamespace(launch=Launch(0, 0, world_size, world_size, "127.0.0.1", 1))


@pytest.mark.parametrize("base", [TensorFlowTrial, EstimatorTrial])
def test_a_single_process_interface_on_several_slots_names_the_fix(base: type) -> None:
    trial_class = type("MyTrial", (base,), {})
    with pytest.raises(ValueError, match=rf"MyTrial is a {base.__name__}.*slots_per_trial to 1 \(it is 2\)"):
        start_framework(trial_class, group(2))  # type: ignore[arg-type]


def test_pytorch_trials_run_on_several_slots_and_a_framework_hook_gets_the_group() -> None:
    assert getattr(PyTorchTrial, "several_slots", True) and not hasattr(PyTorchTrial, "start_workers")
    started: list[object] = []
    hooked = type("MyTrial", (PyTorchTrial,), {"start_workers": staticmethod(started.append)})
    two = group(2)
    start_framework(hooked, two)  # type: ignore[arg-type]
    assert started == [two]
