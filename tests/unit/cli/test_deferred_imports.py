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


def test_protobuf_messages_work_without_the_pure_python_message_module() -> None:
    """The C (upb) protobuf never needs python_message; importing the descriptor pool (its only
    importer) leaves it, with text_format and the decoders it pulls in, unloaded, and messages,
    Struct, text and JSON conversion all behave; grpc's compatibility packages load when used."""
    out = _run(
        """
        import sys
        from pedl.cli import deferred_imports as d
        d.install()
        import grpc
        from google.protobuf import struct_pb2
        from pedl.v1 import scheduler_pb2
        request = scheduler_pb2.GetTrialRequest(trial_id=7)
        again = scheduler_pb2.GetTrialRequest.FromString(request.SerializeToString())
        s = struct_pb2.Struct()
        s.update({"lr": 0.5, "name": "a"})
        print("before", d.loaded("google.protobuf.internal.python_message"), d.loaded("grpc_reflection"),
              "google.protobuf.text_format" in sys.modules, again.trial_id, dict(s)["lr"])
        from google.protobuf import json_format
        print("text", str(again).strip(), json_format.MessageToDict(s) == {"lr": 0.5, "name": "a"})
        from google.protobuf.internal import python_message
        reflection = sys.modules["grpc.reflection"]
        print("after", callable(python_message._AttachFieldHelpers), bool(list(reflection.__path__)))
        """
    )
    lines = out.split("\n")[:3]
    assert lines == ["before False False False 7 0.5", "text trial_id: 7 True", "after True True"], out
