"""`pedl-webui`: serves the web UI and Determined's REST API (`/api/v1`) for one scheduler.

    pedl-webui --master 127.0.0.1:8080 --port 8100

A process of its own, not part of the scheduler: page traffic, HTML and JSON never run on the
scheduler's event loop, and the web UI holds no credential, only its users' sessions (see
docs/ARCHITECTURE.md, "Web UI").
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from pedl import _log
from pedl_webui import importance_cache
from pedl_webui.app import build_app
from pedl_webui.gateway import Gateway
from pedl_webui.serve import Server


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="pedl-webui", description=__doc__.split("\n\n")[0])
    env = os.environ.get
    p.add_argument(
        "--master",
        default=env("PEDL_WEBUI_MASTER") or env("PEDL_MASTER"),
        help="the scheduler's gRPC address, HOST:PORT (env PEDL_WEBUI_MASTER, else PEDL_MASTER)",
    )
    p.add_argument(
        "--host",
        default=env("PEDL_WEBUI_HOST", "127.0.0.1"),
        help="address to serve HTTP on (env PEDL_WEBUI_HOST; default 127.0.0.1)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=int(env("PEDL_WEBUI_PORT", "8100")),
        help="HTTP port; 0 picks a free one (env PEDL_WEBUI_PORT; default 8100)",
    )
    p.add_argument("--port-file", type=Path, help="write the bound port here once serving")
    p.add_argument("--tls-ca", help="CA bundle to verify the scheduler's TLS certificate")
    p.add_argument(
        "--secure-cookie",
        action="store_true",
        help="mark the session cookie Secure (when a TLS proxy serves the web UI over HTTPS)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = p.parse_args(argv)
    if not args.master:
        p.error("name the scheduler with --master HOST:PORT (or PEDL_WEBUI_MASTER)")
    if not 0 <= args.port <= 65535:
        p.error(f"--port must be 0-65535, got {args.port}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log = _log.configure_logging("webui", args.log_level)
    gateway = Gateway(args.master, tls_ca=args.tls_ca)
    app = build_app(gateway, secure_cookie=args.secure_cookie)
    try:
        server = Server(
            app, args.host, args.port, log_level="debug" if args.log_level == "debug" else "warning"
        )
    except OSError as e:
        print(f"pedl-webui: cannot serve on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    port = server.port
    if args.port_file is not None:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(f"{port}\n")
        tmp.replace(args.port_file)

    # uvicorn stops gracefully on SIGTERM/SIGINT, then re-raises the signal to these handlers.
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)
    log.info(
        "serving",
        url=f"http://{args.host}:{port}/",
        determined_master=f"http://{args.host}:{port}",
        master=args.master,
    )
    importance_cache.start_warm_up()  # optuna's import off the first importance request's path
    server.run()
    gateway.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
