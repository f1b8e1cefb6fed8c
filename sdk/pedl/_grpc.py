"""Where every gRPC channel and server of pedl is made, so limits and options agree everywhere."""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import grpc.aio

from pedl import auth
from pedl.auth.bearer import BearerInterceptor

if TYPE_CHECKING:
    from grpc_health.v1 import health

# Message limits, chosen per direction (gRPC's own default, 4 MiB received, is too small for a model
# definition and would fail a create with a transport error instead of the scheduler's clear one):
# - Clients (CLI, SDK, agents, harnesses) send and receive up to MAX_MESSAGE_BYTES: the largest
#   request is a model definition (the scheduler's --model-definition-limit-mb, 96 MiB by default)
#   with its config; the largest answers are lists the scheduler's request limits keep far below.
# - Servers send up to MAX_MESSAGE_BYTES and receive up to what each says it needs (`aio_server`'s
#   `max_receive_bytes`): the scheduler its model definition and config limits plus headroom, the
#   checkpoint store and the harness socket the default. A message over a limit fails that call
#   alone with RESOURCE_EXHAUSTED, naming both sizes.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024

_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]

# Channels that move checkpoint bytes: each stream may have a whole ranged download (8 MiB) in flight
# before the client acknowledges any of it, in frames of up to 4 MiB. HTTP/2's defaults (a 64 KiB
# window grown by BDP probes, 16 KiB frames) cost a round trip per window, slow when cores are busy.
_BULK_OPTIONS = [
    ("grpc.http2.lookahead_bytes", 16 * 1024 * 1024),
    ("grpc.http2.bdp_probe", 0),
    ("grpc.http2.max_frame_size", 4 * 1024 * 1024),
]

# gRPC's own retries (gRFC A6), declared in every client channel's service config: a call refused
# with UNAVAILABLE (the server restarting, a connection reset) is tried again, and an idempotent read
# also after DEADLINE_EXCEEDED, with gRPC's capped exponential backoff, as pedl._backoff computes for
# the loops gRPC cannot cover (the agent's long-lived stream). 5 attempts is gRPC's own ceiling.
RETRY_ATTEMPTS = 5
_READ_PREFIXES = ("Get", "List", "Download")
_READS = frozenset({"WhoAmI", "ValidateToken", "Authorize"})


def _retry_policy(codes: list[str]) -> dict[str, Any]:
    return {
        "maxAttempts": RETRY_ATTEMPTS,
        "initialBackoff": "0.2s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": codes,
    }


def is_idempotent_read(method: str) -> bool:
    return method.startswith(_READ_PREFIXES) or method in _READS


@functools.cache
def service_config(wait_for_ready: bool = False) -> str:
    """Every pedl method retried on UNAVAILABLE, reads also on DEADLINE_EXCEEDED; `wait_for_ready`:
    a call made while the server is down waits (up to its deadline) for it to come back."""
    from pedl.v1 import agent_pb2, auth_pb2, checkpoint_store_pb2, harness_pb2, scheduler_pb2

    reads = [
        {"service": service.full_name, "method": method.name}
        for module in (agent_pb2, auth_pb2, checkpoint_store_pb2, harness_pb2, scheduler_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
        if is_idempotent_read(method.name)
    ]
    configs: list[dict[str, Any]] = [
        {"name": [{}], "retryPolicy": _retry_policy(["UNAVAILABLE"])},
        {"name": reads, "retryPolicy": _retry_policy(["UNAVAILABLE", "DEADLINE_EXCEEDED"])},
    ]
    if wait_for_ready:
        for config in configs:
            config["waitForReady"] = True
    return json.dumps({"methodConfig": configs})


def _client_options(wait_for_ready: bool) -> list[tuple[str, int | str]]:
    return [*_OPTIONS, ("grpc.enable_retries", 1), ("grpc.service_config", service_config(wait_for_ready))]


_SERVER_OPTIONS = _OPTIONS + [
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.so_reuseport", 0),
]


def _server_options(max_receive_bytes: int) -> list[tuple[str, int]]:
    return [
        (k, max_receive_bytes if k == "grpc.max_receive_message_length" else v) for k, v in _SERVER_OPTIONS
    ]


def _client_setup(address: str, token: str | None, tls_ca: str | None) -> tuple[str | None, bytes | None]:
    """The credential and CA bundle for `address`: explicit, else pedl.auth's defaults.

    Unix sockets (an agent's harness socket) stay plaintext and carry no credential.
    """
    if address.startswith("unix:"):
        return None, None
    token = token or auth.credential_for(address)
    ca_path = tls_ca or auth.tls_ca()
    return token, auth.read_pem(ca_path, "TLS CA bundle") if ca_path else None


_ClientT = TypeVar("_ClientT", bound="Client")


class Client:
    """A blocking client of one service: opens its channel, closes it, works as a context manager."""

    def __init__(self, address: str, token: str | None = None, *, bulk: bool = False) -> None:
        """`token`: call as that user (the web UI acting for one) instead of pedl.auth's default;
        `bulk`: the channel moves large messages (checkpoint bytes)."""
        self.address = address
        self._channel = channel(address, token=token, bulk=bulk)

    def __enter__(self: _ClientT) -> _ClientT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()


def channel(
    address: str,
    *,
    token: str | None = None,
    tls_ca: str | None = None,
    wait_for_ready: bool = False,
    bulk: bool = False,
) -> grpc.Channel:
    """A blocking channel; `address` is host:port or unix:///path. Every call carries `token`
    (default: pedl.auth.credential_for); TLS verified against `tls_ca` (default $PEDL_TLS_CA).
    Calls are retried as `service_config` says; `bulk`: HTTP/2 windows and frames for large messages."""
    token, ca = _client_setup(address, token, tls_ca)
    options = _client_options(wait_for_ready) + (_BULK_OPTIONS if bulk else [])
    if ca is not None:
        ch = grpc.secure_channel(address, grpc.ssl_channel_credentials(ca), options=options)
    else:
        ch = grpc.insecure_channel(address, options=options)
    return grpc.intercept_channel(ch, BearerInterceptor(token)) if token else ch


def passthrough_channel(address: str, *, tls_ca: str | None = None) -> grpc.Channel:
    """A blocking channel with no credential of its own: a gateway (the web UI) sends each call with
    the token of the user it acts for, and a call without one is refused, never someone else's."""
    ca_path = tls_ca or auth.tls_ca()
    if ca_path:
        creds = grpc.ssl_channel_credentials(auth.read_pem(ca_path, "TLS CA bundle"))
        return grpc.secure_channel(address, creds, options=_client_options(False))
    return grpc.insecure_channel(address, options=_client_options(False))


def aio_channel(
    address: str, *, token: str | None = None, tls_ca: str | None = None, wait_for_ready: bool = False
) -> grpc.aio.Channel:
    from pedl.auth.bearer_aio import (
        aio_interceptors,
    )  # here: grpc.aio's classes cost a blocking client's start

    token, ca = _client_setup(address, token, tls_ca)
    interceptors = aio_interceptors(token) if token else None
    options = _client_options(wait_for_ready)
    if ca is not None:
        creds = grpc.ssl_channel_credentials(ca)
        return grpc.aio.secure_channel(address, creds, options=options, interceptors=interceptors)
    return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)


def aio_server(
    register: Iterable[Callable[[grpc.aio.Server], None]],
    service_names: Iterable[str],
    address: str,
    interceptors: Iterable[grpc.aio.ServerInterceptor] = (),
    tls: tuple[bytes, bytes] | None = None,
    max_receive_bytes: int = MAX_MESSAGE_BYTES,
) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server with health and reflection, bound to `address`; returns it and its port.

    Reflection (for grpcurl) comes with `pedl[server]`; a harness in a slim install serves without it.
    Both are imported here, not at module level, so a client (the CLI) never loads them.

    `register` callables add the servicers (e.g. `lambda s: add_FooServicer_to_server(x, s)`);
    `service_names` are their full names, for reflection and health; `interceptors` wrap every
    call (e.g. the scheduler's RPC latency metrics); `tls` = (certificate chain PEM, private key PEM)
    serves TLS instead of plaintext; `max_receive_bytes` is the largest request message it takes.
    """
    server = grpc.aio.server(
        options=_server_options(max_receive_bytes), interceptors=list(interceptors) or None
    )
    from grpc_health.v1 import health, health_pb2_grpc

    for add in register:
        add(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = list(service_names)
    try:
        from grpc_reflection.v1alpha import reflection
    except ImportError:  # the slim install: reflection is a debugging aid of the services
        pass
    else:
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    if tls is not None:
        port = server.add_secure_port(address, grpc.ssl_server_credentials([(tls[1], tls[0])]))
    else:
        port = server.add_insecure_port(address)
    if port == 0 and not address.startswith("unix:"):
        raise OSError(f"cannot bind gRPC server to {address}")
    _HEALTH[server] = (health_servicer, names)
    return server, port


# Each server's health servicer and service names, for mark_serving.
_HEALTH: weakref.WeakKeyDictionary[grpc.aio.Server, tuple[health.aio.HealthServicer, list[str]]] = (
    weakref.WeakKeyDictionary()
)


async def mark_serving(server: grpc.aio.Server, serving: bool = True) -> None:
    """Reports SERVING (or NOT_SERVING) for the overall server and each of its services."""
    from grpc_health.v1 import health_pb2

    hs, names = _HEALTH[server]
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ["", *names]:
        await hs.set(name, status)


def service_name(pb2_module: ModuleType, service: str) -> str:
    return pb2_module.DESCRIPTOR.services_by_name[service].full_name
