"""Checkpoint throughput through pedl against boto3 straight to S3, and a PyTorch state_dict save.

Starts SeaweedFS and a `pedl-checkpoint-store --storage s3` on 127.0.0.1, then in the same run:
1 GiB upload and download via pedl and via boto3's upload_file/download_file (ratios pedl/boto3,
target >= 0.9 both ways), and a 200 MB PyTorch state_dict saved and uploaded against torch.save to
local disk. Prints figures; asserts nothing.

pedl measures both ways bytes can travel: `pedl` (the default for S3: the store presigns URLs and
the client moves the bytes itself, each part checked against the record's part hashes by the thread
that fetched it) and `streamed` (the bytes pass through the store's gRPC calls, each file in byte
ranges on several calls at once: the path for shared_fs, and the fallback when S3 cannot be reached
from the client). Rounds are interleaved, each in another order,
with a sync before every timed run, and best and median are printed: single runs vary by up to 2x
on a small shared machine. Both ways start warm alike: boto3's client and pedl's have each moved the
round's uploads before the downloads are timed. On the 2-core machine this runs on (SeaweedFS sharing
it; load 6-7 from other work), 256 MiB, --repeat 4, pedl/boto3 best (median), main's code and this
one's back to back, in the order main, this, this, main (README, "Presigned downloads at boto3's speed"):

    presigned down   main 0.49 (0.51), 0.46 (0.43)   now 1.02 (1.05), 0.91 (0.87)
    streamed down    main 0.44 (0.55), 0.67 (0.73)   now 0.48 (0.58), 0.53 (0.51)
    restore path     main 0.90 (0.99), 0.97 (0.91)   now 0.98 (0.92), 0.84 (0.91)

Those "now" runs read 1 MiB pieces; with 256 KiB pieces (as boto3), 256 MiB --repeat 3 then 1 GiB
--repeat 2 against main's 1 GiB right after (load 2-5):

    presigned down   256 MiB now 1.10 (1.09)    1 GiB now 1.31 (1.00), main 0.56 (0.58)
    streamed down    256 MiB now 0.66 (0.60)    1 GiB now 0.45 (0.45), main 0.58 (0.60)

A presigned download streams each part in 256 KiB pieces, hashed and written while in the CPU's
cache: its client spends what boto3's does (mostly 0.28-0.33 s against 0.29-0.40 s per 256 MiB). Streaming
through the store spends about three times boto3's CPU (client 0.40-0.56 s and store 0.38-0.51 s):
the store does boto3's GETs, the client boto3's writes, and gRPC's hop between them costs as much
again, which 2 cores shared with S3 cannot hide.

    .venv/bin/python benchmarks/checkpoint_throughput.py [--size-mib 1024] [--repeat 1] [--smoke]
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
from statistics import median

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _restore_path import RestorePath  # noqa: E402

from pedl.checkpoints import CheckpointStoreClient  # noqa: E402
from support.processes import start, stop  # noqa: E402
from support.seaweedfs import seaweedfs  # noqa: E402

BUCKET = "pedl-bench"
MiB = 1024 * 1024


class Stopwatch:
    """`with Stopwatch(times): ...` appends the block's wall time to `times`.

    Syncs first, untimed: otherwise the writeback of what earlier runs wrote (S3's volumes, the
    downloaded files) lands on whichever run comes next, and throttles it by seconds.
    """

    def __init__(self, times: list[float]) -> None:
        self.times = times

    def __enter__(self) -> None:
        os.sync()
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
    parser.add_argument("--repeat", type=int, default=1, help="best (and median) of N for each figure")
    parser.add_argument("--smoke", action="store_true", help="8 MiB, 8 MB state_dict, once: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.size_mib, args.state_dict_mb, args.repeat = 8, 8, 1
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
    ways = ("boto3", "pedl", "streamed")
    times: dict[str, list[float]] = {f"{w} {d}": [] for d in ("up", "down") for w in ways}
    with CheckpointStoreClient(address) as client, CheckpointStoreClient(address, direct=False) as streamed:
        clients = {"pedl": client, "streamed": streamed}
        uuids: dict[str, str] = {}

        def upload(way: str, i: int) -> None:
            if way == "boto3":
                s3.upload_file(str(src / "model.bin"), BUCKET, "direct/model.bin")
            else:
                uuids[way] = clients[way].upload(src, experiment_id=1, trial_id=1, total_batches=i).uuid

        def download(way: str, target: Path) -> None:
            if way == "boto3":
                s3.download_file(BUCKET, "direct/model.bin", str(target))
            else:
                clients[way].download(uuids[way], target)

        for i in range(repeat):
            # Interleaved, each round in another order: the machine's drifts (writeback of what the
            # previous way wrote, other load) hit every way alike.
            order = ways[i % len(ways) :] + ways[: i % len(ways)]
            for way in order:
                with Stopwatch(times[f"{way} up"]):
                    upload(way, i)
            for way in order:
                target = work / f"{way}-{i}"
                with Stopwatch(times[f"{way} down"]):
                    download(way, target)
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
            for way in ("pedl", "streamed"):
                client.delete(uuids[way])
        gib = size / 1024**3
        print(f"== {size // MiB} MiB checkpoint, best of {repeat}, through SeaweedFS on 127.0.0.1")
        for name, values in times.items():
            runs = " ".join(f"{v:.2f}" for v in values)
            print(f"{name:13s} {best(values):7.2f} s  {gib / best(values) * 1024:7.1f} MiB/s  (runs: {runs})")
        for direction in ("up", "down"):
            for way, note in (("pedl", "target >= 0.9"), ("streamed", "through the store, for the record")):
                ratio = best(times[f"boto3 {direction}"]) / best(times[f"{way} {direction}"])
                typical = median(times[f"boto3 {direction}"]) / median(times[f"{way} {direction}"])
                label = f"{way}/boto3"
                print(f"ratio {label:14s} {direction:4s}: {ratio:.2f}  median {typical:.2f}  ({note})")

        shutil.rmtree(src)
        restore_rounds(RestorePath(work, size, client, s3, BUCKET), work, repeat)
        weights = state_dict(sd_bytes)
        local: list[float] = []
        pedl_times: list[float] = []
        for i in range(repeat):
            path = work / f"local-{i}" / "state.pt"
            path.parent.mkdir()
            with Stopwatch(local):
                torch.save(weights, path)
            shutil.rmtree(path.parent)
            ckpt = work / f"ckpt-{i}"
            with Stopwatch(pedl_times):
                ckpt.mkdir()
                torch.save(weights, ckpt / "state.pt")
                client.upload(ckpt, experiment_id=2, trial_id=1, total_batches=i)
            shutil.rmtree(ckpt)
        print(f"== {sd_bytes // 1_000_000} MB state_dict, best of {repeat}")
        print(f"torch.save to local disk      {best(local):6.2f} s")
        factor = best(pedl_times) / best(local)
        print(f"torch.save + pedl upload (S3) {best(pedl_times):6.2f} s  ({factor:.1f}x)")


def restore_rounds(restore: RestorePath, work: Path, repeat: int) -> None:
    """The harness's restore path (start to first batch) with pedl's download against boto3's."""
    times: dict[str, list[float]] = {"boto3": [], "pedl": []}
    try:
        for i in range(repeat):
            for way in ("boto3", "pedl") if i % 2 == 0 else ("pedl", "boto3"):
                os.sync()
                times[way].append(restore.run(way, work / f"restore-{way}-{i}"))
    finally:
        restore.close()
    mib = restore.bytes // MiB
    print(f"== restore path: start to first batch after restoring a {mib} MiB checkpoint, best of {repeat}")
    for way, values in times.items():
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{way + ' download':14s} {best(values):7.2f} s  (runs: {runs})")
    ratio = best(times["boto3"]) / best(times["pedl"])
    typical = median(times["boto3"]) / median(times["pedl"])
    print(f"ratio pedl/boto3     restore: {ratio:.2f}  median {typical:.2f}  (target >= 0.9)")


if __name__ == "__main__":
    main()
