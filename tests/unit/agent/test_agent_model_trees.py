"""Each experiment's model definition is unpacked once per agent, completely or not at all, shared by
its runs while they last and removed once idle; a run's copy is its own."""

from __future__ import annotations

import asyncio
import io
import tarfile
from pathlib import Path

import pytest

from pedl_agent.model_trees import ModelTrees, copy_view, unpack_tree
from pedl_agent.sandbox import Sandbox


def archive(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Archives:
    """The agent's archive cache as ModelTrees uses it: counts the fetches, forgets on request."""

    def __init__(self, files: dict[int, dict[str, str]]) -> None:
        self.data = {e: archive(f) for e, f in files.items()}
        self.gets: list[int] = []
        self.forgotten: list[int] = []

    async def get(self, experiment_id: int, sha256: str = "") -> bytes:
        self.gets.append(experiment_id)
        await asyncio.sleep(0.01)  # another run of the experiment may ask meanwhile
        return self.data[experiment_id]

    def cached(self) -> list[int]:
        return []

    def forget(self, experiment_id: int) -> None:
        self.forgotten.append(experiment_id)


def trees(tmp_path: Path, cache: Archives, keep: float = 600.0) -> ModelTrees:
    return ModelTrees(cache, tmp_path / "trees", keep)  # type: ignore[arg-type]


def test_runs_starting_together_unpack_the_experiment_once(tmp_path: Path) -> None:
    cache = Archives({7: {"model.py": "x = 1\n", "run.sh": "#!/bin/sh\n"}})
    shared = trees(tmp_path, cache)

    async def scenario() -> list[tuple[Path, bool]]:
        return await asyncio.gather(*(shared.acquire(7) for _ in range(3)))

    got = asyncio.run(scenario())
    assert [unpacked for _, unpacked in got] == [True, False, False]
    assert {tree for tree, _ in got} == {tmp_path / "trees" / "7"}
    assert cache.gets == [7] and shared.unpacked == 1
    assert (tmp_path / "trees" / "7" / "model.py").read_text() == "x = 1\n"
    assert (tmp_path / "trees" / "7" / "run.sh").stat().st_mode & 0o111  # exec bits kept


def test_a_tree_of_another_model_definition_under_the_same_id_is_replaced(tmp_path: Path) -> None:
    """An experiment id of a fresh scheduler database names another model definition: the agent
    tells them apart by the sha256 the scheduler sends, never running the old code."""
    import hashlib

    cache = Archives({4: {"model.py": "old = 1\n"}})
    shared = trees(tmp_path, cache)
    old_sha = hashlib.sha256(cache.data[4]).hexdigest()
    tree, unpacked = asyncio.run(shared.acquire(4, old_sha))
    shared.release(4)
    assert unpacked and asyncio.run(shared.acquire(4, old_sha)) == (tree, False)  # same one: reused
    shared.release(4)

    cache.data[4] = archive({"model.py": "new = 2\n"})
    new_sha = hashlib.sha256(cache.data[4]).hexdigest()
    assert asyncio.run(shared.acquire(4, new_sha)) == (tree, True)
    assert (tree / "model.py").read_text() == "new = 2\n"
    assert sorted(p.name for p in tree.iterdir()) == ["model.py"]  # the digest lies beside, unseen
    shared.release(4)
    assert asyncio.run(shared.acquire(4, "")) == (tree, False)  # an older scheduler: by id alone


def test_the_archive_cache_refetches_a_copy_that_does_not_match(tmp_path: Path) -> None:
    import hashlib

    from pedl_agent.model_definitions import ModelDefinitionCache

    class Served(ModelDefinitionCache):
        def __init__(self, data: bytes) -> None:
            super().__init__("127.0.0.1:1", tmp_path / "archives")
            self.served, self.fetches = data, 0

        async def _fetch(self, experiment_id: int) -> bytes:
            self.fetches += 1
            return self.served

    cache = Served(b"first")
    assert asyncio.run(cache.get(9)) == b"first"
    cache.served = b"second"
    assert asyncio.run(cache.get(9)) == b"first" and cache.fetches == 1  # no digest: cached by id
    assert asyncio.run(cache.get(9, hashlib.sha256(b"second").hexdigest())) == b"second"
    assert cache.fetches == 2
    with pytest.raises(RuntimeError, match="does not match the sha256"):
        asyncio.run(cache.get(9, hashlib.sha256(b"third").hexdigest()))


def test_a_broken_archive_leaves_no_tree_to_be_used(tmp_path: Path) -> None:
    cache = Archives({})
    cache.data[3] = archive({"a.py": "ok\n"})[:-40]  # truncated: unpacking fails half-way
    shared = trees(tmp_path, cache)
    with pytest.raises(ValueError, match="experiment 3: model definition archive is corrupt"):
        asyncio.run(shared.acquire(3))
    assert list((tmp_path / "trees").iterdir()) == []  # neither a tree nor a partial one
    assert shared._users == {}  # the failed run holds nothing


def test_what_a_crashed_agent_left_half_unpacked_is_removed_at_start(tmp_path: Path) -> None:
    partial = tmp_path / "trees" / ".partial-5-123-abcd"
    partial.mkdir(parents=True)
    (partial / "half.py").write_text("")
    trees(tmp_path, Archives({}))
    assert not partial.exists()


def test_an_idle_experiments_tree_and_archive_go_but_not_while_a_run_holds_it(tmp_path: Path) -> None:
    cache = Archives({1: {"a.py": ""}, 2: {"b.py": ""}})
    shared = trees(tmp_path, cache, keep=60.0)

    async def scenario() -> None:
        await shared.acquire(1)
        await shared.acquire(2)
        shared.release(1)
        now = shared._idle_since[1]
        assert await shared.sweep(now + 59) == []  # idle, but not for long enough
        assert await shared.sweep(now + 61) == [1]  # experiment 2 still has a run here
        assert not (tmp_path / "trees" / "1").exists() and (tmp_path / "trees" / "2").is_dir()
        assert cache.forgotten == [1]
        tree, unpacked = await shared.acquire(1)  # a late trial of experiment 1: unpacked again
        assert unpacked and (tree / "a.py").exists()

    asyncio.run(scenario())
    assert [p.name for p in (tmp_path / "trees").iterdir() if p.name.startswith(".")] == []


def test_trees_an_earlier_agent_left_are_reused_then_removed_once_idle(tmp_path: Path) -> None:
    unpack_tree(archive({"old.py": ""}), tmp_path / "trees" / "9")
    shared = trees(tmp_path, Archives({}), keep=60.0)

    async def scenario() -> None:
        assert await shared.sweep() == []
        assert await shared.sweep(shared._idle_since[9] + 61) == [9]

    asyncio.run(scenario())
    assert not (tmp_path / "trees" / "9").exists()


def test_a_runs_copy_is_its_own(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    unpack_tree(archive({"shipped.txt": "shipped\n", "pkg/deep.txt": "deep\n"}), tree)
    view = tmp_path / "run" / "model"
    view.mkdir(parents=True)
    (view / "left-over").write_text("from an earlier attempt")
    copy_view(tree, view)
    assert not (view / "left-over").exists()
    (view / "shipped.txt").write_text("rewritten\n")
    (view / "pkg" / "deep.txt").unlink()
    assert (tree / "shipped.txt").read_text() == "shipped\n" and (tree / "pkg" / "deep.txt").exists()


def test_forked_harnesses_see_no_experiments_tree_but_their_server_reads_them(tmp_path: Path) -> None:
    box = Sandbox("bwrap")
    trees_root, trials = tmp_path / "work" / "model_definitions" / "trees", tmp_path / "work" / "trials"
    plan = box.child_plan(trials / "1-1", tmp_path / "sock" / "1-1.sock", trials, trees_root)
    assert str(trees_root) in plan["covered"]  # type: ignore[operator]
    argv = box.wrap_fork_server(["py"], trials, tmp_path / "sock", trees_root)
    triples = list(zip(argv, argv[1:], argv[2:], strict=False))
    assert ("--ro-bind", str(trees_root), str(trees_root)) in triples


def test_unpacking_a_tree_that_appeared_meanwhile_keeps_the_first(tmp_path: Path) -> None:
    """A run killed while unpacking leaves its thread to finish; the next run's unpack loses the race."""
    tree = tmp_path / "trees" / "4"
    unpack_tree(archive({"a.py": "first\n"}), tree)
    unpack_tree(archive({"a.py": "first\n"}), tree)
    assert (tree / "a.py").read_text() == "first\n"
    assert [p.name for p in (tmp_path / "trees").iterdir()] == ["4"]


class Forks:
    """What a TrialRun asks of the agent's fork servers before a run: may its harness mount a view?"""

    def __init__(self, overlays: bool) -> None:
        self._overlays = overlays

    def overlays(self, environment: str) -> bool:
        return self._overlays


@pytest.mark.parametrize(
    ("forked", "slots", "overlay"), [(False, 1, False), (True, 1, True), (True, 2, False)]
)
def test_a_run_copies_the_tree_unless_its_forked_harness_mounts_it(
    tmp_path: Path, forked: bool, slots: int, overlay: bool
) -> None:
    """Forked single-rank runs mount an overlay (the agent only makes the mount point); spawned runs,
    whose ranks share one directory, get a copy of the tree (never an un-gzip of their own)."""
    from pedl.v1 import agent_pb2
    from pedl_agent.run_settings import RunSettings
    from pedl_agent.trial_run import TrialRun

    cache = Archives({5: {"model.py": "x = 1\n"}})
    settings = RunSettings(
        harness_argv=["python", "-m", "pedl.harness"],
        work_dir=tmp_path,
        socket_dir=tmp_path,
        model_definitions=trees(tmp_path, cache),
        send=lambda _: None,
        fork_servers=Forks(True) if forked else None,  # type: ignore[arg-type]
    )
    slot_ids = [f"cpu{i}" for i in range(slots)]
    start = agent_pb2.StartTrial(
        trial_id=1, run_id=1, experiment_id=5, slot_ids=slot_ids, model_definition_name="m"
    )
    run = TrialRun(start, settings)
    model_dir = asyncio.run(run._prepare())
    assert model_dir == tmp_path / "trials" / "1-1" / "m"
    assert run._model_dir is not None and run._model_dir.overlay is overlay
    assert sorted(p.name for p in model_dir.iterdir()) == ([] if overlay else ["model.py"])
    if overlay:
        view = run._model_dir.view()
        assert view is not None
        assert view["lower"] == str(tmp_path / "trees" / "5") and view["target"] == str(model_dir)
        assert Path(view["upper"]).is_relative_to(run.trial_dir)
