"""Checkpoint throughput through pedl (client -> checkpoint store -> S3) against boto3 straight to S3.

Starts SeaweedFS and a `pedl-checkpoint-store --storage s3` on 127.0.0.1, then in the same run:
1 GiB upload and download via pedl and via boto3's upload_file/download_file (ratios pedl/boto3;
boto3 straight to S3 is also what a harness using presigned URLs would get), and a 200 MB PyTorch
state_dict saved and uploaded against torch.save to local disk. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/checkpoint_throughput.py [--size-mib 1024] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pedl.checkpoints import CheckpointStoreClient  # noqa: E402
from support.processes import start, stop  # noqa: E402
from support.seaweedfs import seaweedfs  # noqa: E402

BUCKET = "pedl-bench"
MiB = 1024 * 1024


class Stopwatch:
    """`with Stopwatch(times): ...` appends the block's wall time to `times`."""

    def __init__(self, times: list[float]) -> None:
        self.times = times

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.times.append(time.perf_counter() - self.started)


def write_random(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    block = os.urandom(16 * MiB)
    with open(path, "wb") as f:
        for offset in range(0, size, len(block)):
            f.write(block[: min(len(block), size - offset)])
            block = block[1:] + block[:1]  # differs per block, so nothing deduplicates


def state_dict(total_bytes: int) -> dict[str, torch.Tensor]:
    tensor_bytes = 4 * MiB
    return {f"layer{i}.weight": torch.randn(tensor_bytes // 4) for i in range(total_bytes // tensor_bytes)}


def best(times: list[float]) -> float:
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--state-dict-mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1, help="best of N for each figure")
    args = parser.parse_args()
    # The services refuse to start without a cluster secret; they and our clients share this one.
    os.environ.setdefault("PEDL_CLUSTER_SECRET", secrets.token_urlsafe(32))
    size = args.size_mib * MiB
    work = Path(tempfile.mkdtemp(prefix="pedl-bench-"))
    try:
        with seaweedfs(work / "seaweedfs") as weed:
            weed.create_bucket(BUCKET)
            port_file = work / "store.port"
            store = start(
                "checkpoint_store",
                ["pedl-checkpoint-store", "--port", "0", "--port-file", str(port_file), "--storage", "s3",
                 "--s3-bucket", BUCKET, "--s3-endpoint-url", weed.endpoint_url, "--s3-prefix", "store",
                 "--log-level", "warning"],
                work,
                port_file,
                env={"AWS_ACCESS_KEY_ID": weed.access_key, "AWS_SECRET_ACCESS_KEY": weed.secret_key},
            )  # fmt: skip
            try:
                run(weed, store.address, work, size, args.state_dict_mb * 1_000_000, args.repeat)
            finally:
                stop(store.process)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(weed: object, address: str, work: Path, size: int, sd_bytes: int, repeat: int) -> None:
    s3 = weed.client()  # type: ignore[attr-defined]
    src = work / "src"
    write_random(src / "model.bin", size)
    times: dict[str, list[float]] = {k: [] for k in ("boto3 up", "pedl up", "boto3 down", "pedl down")}
    with CheckpointStoreClient(address) as client:
        for i in range(repeat):
            with Stopwatch(times["boto3 up"]):
                s3.upload_file(str(src / "model.bin"), BUCKET, "direct/model.bin")
            with Stopwatch(times["pedl up"]):
                uuid = client.upload(src, experiment_id=1, trial_id=1, total_batches=i).uuid
            out = work / f"boto3-{i}.bin"
            with Stopwatch(times["boto3 down"]):
                s3.download_file(BUCKET, "direct/model.bin", str(out))
            out.unlink()
            with Stopwatch(times["pedl down"]):
                client.download(uuid, work / f"pedl-{i}")
            shutil.rmtree(work / f"pedl-{i}")
            client.delete(uuid)
        gib = size / 1024**3
        print(f"== {size // MiB} MiB checkpoint, best of {repeat}, through SeaweedFS on 127.0.0.1")
        for name, values in times.items():
            print(f"{name:11s} {best(values):7.2f} s  {gib / best(values) * 1024:7.1f} MiB/s")
        for direction in ("up", "down"):
            ratio = best(times[f"boto3 {direction}"]) / best(times[f"pedl {direction}"])
            print(f"ratio pedl/boto3 {direction:4s}: {ratio:.2f}  (target >= 0.9)")

        shutil.rmtree(src)
        weights = state_dict(sd_bytes)
        local: list[float] = []
        pedl: list[float] = []
        for i in range(repeat):
            path = work / f"local-{i}" / "state.pt"
            path.parent.mkdir()
            with Stopwatch(local):
                torch.save(weights, path)
            shutil.rmtree(path.parent)
            ckpt = work / f"ckpt-{i}"
            with Stopwatch(pedl):
                ckpt.mkdir()
                torch.save(weights, ckpt / "state.pt")
                client.upload(ckpt, experiment_id=2, trial_id=1, total_batches=i)
            shutil.rmtree(ckpt)
        print(f"== {sd_bytes // 1_000_000} MB state_dict, best of {repeat}")
        print(f"torch.save to local disk      {best(local):6.2f} s")
        print(f"torch.save + pedl upload (S3) {best(pedl):6.2f} s  ({best(pedl) / best(local):.1f}x)")


if __name__ == "__main__":
    main()
