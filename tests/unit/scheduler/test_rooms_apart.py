"""The experiment core's rooms hold no reference to one another (issue #35): each holds the shared
state, the one unit of work and the dispatcher's `perform`, so what one room needs of another goes
through `Dispatcher.perform` as a typed value a reader can follow, not through a hidden attribute."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.experiments.dispatcher import Dispatcher
from pedl_scheduler.storage import open_storage

EXPERIMENTS = Path(__file__).resolve().parents[3] / "services" / "scheduler" / "experiments"
ROOM_MODULES = {
    "lifecycle",
    "scheduling_pass",
    "trial_runs",
    "adoption",
    "result_intake",
    "search_driver",
    "checkpoint_lifecycle",
    "recovery",
    "revival",
}


def test_no_room_holds_another_room(tmp_path: Path) -> None:
    async def main() -> None:
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), Cluster(), "127.0.0.1:1")
        try:
            rooms = manager.rooms
            room_objects = [v for k, v in vars(rooms).items() if k not in ("state", "work")]
            room_types = tuple({type(r) for r in room_objects})
            assert len(room_objects) == 8, room_objects
            for room in room_objects:
                held = {k: type(v).__name__ for k, v in vars(room).items() if isinstance(v, room_types)}
                assert not held, f"{type(room).__name__} holds {held}"
                assert not any(isinstance(v, Dispatcher) for v in vars(room).values())
        finally:
            manager.db.close()

    asyncio.run(main())


def test_no_room_module_imports_another_room_module() -> None:
    """Only the dispatcher (and the manager, through it) imports the rooms; `recovery`'s functions
    are shared by start-up and revival (no room object in them)."""
    for name in sorted(ROOM_MODULES):
        tree = ast.parse((EXPERIMENTS / f"{name}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module.removeprefix("pedl_scheduler.experiments")
                if module.startswith("."):
                    imported.add(module[1:])
                elif module == "":
                    imported.update(a.name for a in node.names)
        others = imported & ROOM_MODULES - {name}
        # Functions of the shared state, not rooms: recovery.load, usable_checkpoint, scheduling_agent.
        allowed = {
            "revival": {"recovery"},
            "trial_runs": {"checkpoint_lifecycle"},
            "lifecycle": {"scheduling_pass"},
        }.get(name, set())
        assert others <= allowed, f"{name} imports room modules {sorted(others - allowed)}"
