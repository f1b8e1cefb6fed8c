"""pedl.cli.deferred_imports: asyncio and grpc.aio stay unloaded through `import grpc`, and work as
the real modules the moment code uses them (each case in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_grpc_imports_without_asyncio_and_async_code_still_runs() -> None:
    out = _run(
        """
        import sys
        from pedl.cli import deferred_imports as d
        d.install()
        import grpc
        from pedl import _grpc
        print("before", d.loaded("asyncio"), d.loaded("grpc.aio"), "ssl" in sys.modules)
        import asyncio
        from asyncio import Queue

        async def main():
            channel = _grpc.aio_channel("127.0.0.1:1", token="t")  # the aio interceptors too
            await channel.close()
            queue = Queue()
            await queue.put(3)
            return await asyncio.wait_for(queue.get(), 5)

        print("result", asyncio.run(main()))
        import asyncio.subprocess
        print("after", d.loaded("asyncio"), d.loaded("grpc.aio"), sys.modules["grpc.aio"] is grpc.aio,
              isinstance(asyncio.get_event_loop_policy(), asyncio.AbstractEventLoopPolicy))
        """
    )
    assert out.split("\n")[:3] == ["before False False False", "result 3", "after True True True True"], out


def test_modules_already_imported_are_left_alone() -> None:
    out = _run(
        """
        import asyncio, sys
        import grpc
        aio = sys.modules["grpc.aio"]
        from pedl.cli import deferred_imports as d
        d.install()
        print(sys.modules["asyncio"] is asyncio, sys.modules["grpc.aio"] is aio, type(aio).__name__)
        """
    )
    assert out.strip() == "True True module", out
