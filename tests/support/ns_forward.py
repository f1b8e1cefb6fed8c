"""`python ns_forward.py PORT_FILE NAMESPACE HOST:PORT [LISTEN]`: relays connections into a namespace.

It listens on a free 127.0.0.1 port of the namespace it starts in (writes it to PORT_FILE), then
enters network namespace NAMESPACE (`ip netns` name) and opens each relayed connection to HOST:PORT
from there: a socket keeps the namespace it was made in. So a process on no host of the rig (the
test) reaches the scheduler as a client on that host would, over loopback and the rig's bridge only.
LISTEN (HOST:PORT, default 127.0.0.1:0) with a NAMESPACE given as a path (/proc/PID/ns/net) relays
the other way: started on a rig host with `ip netns exec`, it lets that host reach a server the test
runs outside the rig.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
import sys
from pathlib import Path

CLONE_NEWNET = 0x40000000


def enter_namespace(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(name if name.startswith("/") else f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns({name}): {os.strerror(error)}")
    finally:
        os.close(fd)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(listener: socket.socket, target: str) -> None:
    host, _, port = target.rpartition(":")

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(relay, sock=listener)
    async with server:
        await server.serve_forever()


def main(port_file: str, namespace: str, target: str, listen: str = "127.0.0.1:0") -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    host, _, port = listen.rpartition(":")
    listener.bind((host, int(port)))
    listener.listen(64)
    enter_namespace(namespace)
    Path(port_file + ".tmp").write_text(str(listener.getsockname()[1]))
    os.replace(port_file + ".tmp", port_file)
    asyncio.run(serve(listener, target))


if __name__ == "__main__":
    main(*sys.argv[1:5])
