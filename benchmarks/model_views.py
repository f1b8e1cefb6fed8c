"""Per-run model definition preparation on an agent: un-gzip per run (before) against the shared tree
unpacked once per experiment and a copy-on-write view per run (after), in the same run.

A model definition of many files (a repository's worth of modules and data files) is packed as the
CLI packs it. "before" is what every run cost until then: empty the run's model directory and
un-gzip the archive into it. "after" is what a run costs once its experiment's tree is on the agent:
a forked harness mounts an overlay in its own mount namespace (timed inside the forked child: the
mount namespace, the mount, nothing else) after the agent made its mount point; a spawned run (several
ranks, or no fork server) gets a plain copy of the tree. The first run of an experiment on an agent
still unpacks once (shown too). Medians of `--runs` rounds, each timing all three ways in turn, in
the same process and file system.

    .venv/bin/python benchmarks/model_views.py [--files 2000] [--kib 8] [--runs 7] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pedl.context import pack, unpack
from pedl.harness import _model_view
from pedl_agent.disk import remove_tree
from pedl_agent.model_trees import copy_view, mount_point, unpack_tree

WORDS = ("def", "return", "self", "import", "torch", "tensor", "layer", "batch", "config", "loss", "for")


def write_model(root: Path, files: int, kib: int, rng: random.Random) -> Path:
    """`files` source-like files of about `kib` KiB each, in nested packages."""
    model = root / "model"
    for index in range(files):
        path = model / f"pkg{index % 20}" / f"sub{index % 7}" / f"module_{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        while sum(len(line) for line in lines) < kib * 1024:
            lines.append(" ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(10)) + "\n")
        path.write_text("".join(lines))
    (model / "__init__.py").write_text("")
    return model


def before(data: bytes, dest: Path) -> float:
    """Un-gzip per run, as every run did (into an emptied directory)."""
    started = time.perf_counter()
    if dest.exists():
        shutil.rmtree(dest)
    unpack(data, dest)
    return time.perf_counter() - started


def copied(tree: Path, dest: Path) -> float:
    started = time.perf_counter()
    copy_view(tree, dest)
    return time.perf_counter() - started


def overlaid(tree: Path, trial: Path) -> float | None:
    """The agent's mount point, then the forked child's own mount namespace and overlay; None if no
    overlay can be mounted here."""
    started = time.perf_counter()
    mount_point(trial / "model")
    agent_side = time.perf_counter() - started
    view = _model_view.ModelView(str(tree), str(trial / "model"), str(trial / "up"), str(trial / "work"))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        started = time.perf_counter()
        why = _model_view.show_alone(view)
        took = time.perf_counter() - started
        ok = not why and len(os.listdir(view.target)) > 0
        os.write(write_end, json.dumps({"seconds": took, "why": why, "ok": ok}).encode())
        os._exit(0)
    os.close(write_end)
    reply = json.loads(os.read(read_end, 65536))
    os.close(read_end)
    os.waitpid(pid, 0)
    if not reply["ok"]:
        print(f"overlay: not available here ({reply['why']})")
        return None
    return agent_side + float(reply["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--kib", type=int, default=8, help="size of each file")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="100 files, 3 runs: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.files, args.runs = 100, 3
    base = Path(tempfile.mkdtemp(prefix="pedl-model-views-", dir=os.environ.get("PEDL_BENCH_DIR")))
    try:
        model = write_model(base, args.files, args.kib, random.Random(1))
        data = pack(model).data
        size = sum(p.stat().st_size for p in model.rglob("*") if p.is_file())
        started = time.perf_counter()
        tree = base / "trees" / "1"
        unpack_tree(data, tree)
        once = time.perf_counter() - started
        old: list[float] = []
        copies: list[float] = []
        mounts: list[float | None] = []
        for index in range(args.runs):  # interleaved: the machine's load falls on each alike
            runs = [base / "trials" / f"{index}-{kind}" for kind in (1, 2, 3)]
            old.append(before(data, runs[0] / "model"))
            copies.append(copied(tree, runs[1] / "model"))
            mounts.append(overlaid(tree, runs[2]))
            for run in runs:
                remove_tree(run)
        print(
            f"== a model definition of {args.files} files, {size / 2**20:.1f} MiB "
            f"({len(data) / 2**20:.1f} MiB packed), median of {args.runs} runs"
        )
        old_ms = statistics.median(old) * 1000
        print(f"first run of the experiment on the agent (unpack once)  {once * 1000:8.1f} ms")
        print(f"before: un-gzip per run                                  {old_ms:8.1f} ms")
        copy_ms = statistics.median(copies) * 1000
        print(
            f"after, spawned run (copy of the tree)                    {copy_ms:8.1f} ms  "
            f"ratio {copy_ms / old_ms:.3f}"
        )
        if all(m is not None for m in mounts):
            mount_ms = statistics.median(m for m in mounts if m is not None) * 1000
            print(
                f"after, forked run (overlay)                              {mount_ms:8.1f} ms  "
                f"ratio {mount_ms / old_ms:.3f}"
            )
    finally:
        remove_tree(base)  # whatever modes overlayfs left its work directories with
    return 0


if __name__ == "__main__":
    sys.exit(main())
