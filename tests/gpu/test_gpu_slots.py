"""On a machine with NVIDIA GPUs: the agent offers each GPU as a slot, and a trial given a slot
sees exactly that GPU (CUDA_VISIBLE_DEVICES holds its uuid). Skipped where torch sees no GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from pedl_agent.devices import cuda_visible_devices, detect_gpus, make_slots  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

VISIBLE = (
    "import json, torch; n = torch.cuda.device_count(); "
    "print(json.dumps(['GPU-' + str(torch.cuda.get_device_properties(i).uuid) for i in range(n)]))"
)


def visible_uuids(cuda_visible: str) -> list[str]:
    """The GPUs a fresh process sees under CUDA_VISIBLE_DEVICES=`cuda_visible`."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": cuda_visible}
    done = subprocess.run(
        [sys.executable, "-c", VISIBLE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout)


def test_nvidia_smi_lists_the_gpus_torch_sees() -> None:
    gpus = detect_gpus()
    assert gpus, "nvidia-smi found no GPU on a machine where torch sees one"
    assert all(g.uuid.startswith("GPU-") and g.name for g in gpus)
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        assert len(gpus) == torch.cuda.device_count()
        assert sorted(g.uuid for g in gpus) == sorted(visible_uuids(",".join(g.uuid for g in gpus)))


def test_the_agent_offers_one_gpu_slot_per_gpu_and_no_cpu_slot_by_default() -> None:
    gpus = detect_gpus()
    slots = make_slots(gpus, None)
    assert [(s.id, s.type, s.device) for s in slots] == [(f"gpu{g.index}", "gpu", g.uuid) for g in gpus]


def test_a_trial_on_a_gpu_slot_sees_exactly_that_gpu() -> None:
    gpus = detect_gpus()
    for gpu in gpus:
        assert visible_uuids(cuda_visible_devices([f"gpu{gpu.index}"], gpus)) == [gpu.uuid]


def test_a_trial_on_a_cpu_slot_of_a_gpu_machine_sees_no_gpu() -> None:
    gpus = detect_gpus()
    assert cuda_visible_devices(["cpu0"], gpus) == ""
    assert visible_uuids("") == []
