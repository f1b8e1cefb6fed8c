"""The slots this machine offers: one per GPU (found with nvidia-smi, never torch) plus CPU slots."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from pedl.v1 import common_pb2

NVIDIA_SMI_QUERY = ["--query-gpu=index,uuid,name", "--format=csv,noheader"]


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str


def parse_nvidia_smi(output: str) -> list[Gpu]:
    """Parses `nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader` output."""
    gpus = []
    for lineno, line in enumerate(output.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) != 3 or not parts[0].isdigit():
            raise ValueError(f"nvidia-smi output line {lineno} is not 'index, uuid, name': {line!r}")
        gpus.append(Gpu(index=int(parts[0]), uuid=parts[1], name=parts[2]))
    return gpus


def detect_gpus(nvidia_smi: str | None = None) -> list[Gpu]:
    """The GPUs nvidia-smi lists; none when it is missing or fails (a CPU-only machine)."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(out.stdout)


def make_slots(gpus: list[Gpu], cpu_slots: int | None) -> list[common_pb2.Slot]:
    """GPU slots "gpu<i>" (device = GPU uuid) then CPU slots "cpu<i>".

    Without an explicit count a GPU machine offers no CPU slots and a CPU machine offers one.
    """
    if cpu_slots is None:
        cpu_slots = 0 if gpus else 1
    if cpu_slots < 0:
        raise ValueError(f"--slots must be >= 0, got {cpu_slots}")
    slots = [common_pb2.Slot(id=f"gpu{g.index}", type="gpu", device=g.uuid) for g in gpus]
    slots += [common_pb2.Slot(id=f"cpu{i}", type="cpu", device=f"cpu{i}") for i in range(cpu_slots)]
    if not slots:
        raise ValueError("this agent offers no slots: no GPU was found and --slots is 0")
    return slots


def cuda_visible_devices(slot_ids: list[str], gpus: list[Gpu]) -> str | None:
    """CUDA_VISIBLE_DEVICES for a trial given its slots; None on a machine without GPUs.

    A CPU-only trial on a GPU machine gets "" so it cannot take GPUs other trials were given.
    """
    if not gpus:
        return None
    by_slot = {f"gpu{g.index}": g.uuid for g in gpus}
    return ",".join(by_slot[s] for s in slot_ids if s in by_slot)
