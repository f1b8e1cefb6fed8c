"""Retries of direct transfers (client side) and of the store's own S3 calls, on synthetic failures."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import boto3
import pytest
import urllib3
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from pedl.checkpoints import presigned_http
from pedl_checkpoint_store import s3_retry
from pedl_checkpoint_store.s3_errors import S3StorageError, explain
from pedl_checkpoint_store.s3_presign import part_size_for
from pedl_checkpoint_store.s3_transfer import stream_range

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(presigned_http, "BACKOFF_BASE_SECONDS", 0.0)
    monkeypatch.setattr(s3_retry, "BACKOFF_BASE_SECONDS", 0.0)


def flaky(failures: list[BaseException], result: str = "ok"):  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return result

    return attempt, calls


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next scripted (status, body, declared length) of its server."""

    def do_GET(self) -> None:
        self.server.requests += 1  # type: ignore[attr-defined]  # set by serving()
        self.server.ranges.append(self.headers.get("Range"))  # type: ignore[attr-defined]
        status, body, length = self.server.script.pop(0) if self.server.script else (200, b"ok", 2)  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)  # fewer bytes than declared: the body is cut short
        self.close_connection = True

    do_PUT = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def serving() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.script, server.requests, server.ranges = [], 0, []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def get(server: http.server.ThreadingHTTPServer, max_attempts: int = 3) -> urllib3.BaseHTTPResponse:
    pool = presigned_http.pool_manager(1, max_attempts)
    return presigned_http.request(pool, "GET", f"http://127.0.0.1:{server.server_port}/k", "fetching x")


def test_client_retries_5xx_and_a_body_cut_short_then_succeeds(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(503, b"", 0), (200, b"hal", 6)]
    response = get(serving)
    assert (response.status, response.data, serving.requests) == (200, b"ok", 3)


def test_client_gives_up_with_the_last_error(serving) -> None:  # type: ignore[no-untyped-def]
    body = b"<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
    serving.script = [(503, body, len(body))] * 5
    with pytest.raises(
        presigned_http.TransferError, match="fetching x failed after 3 attempts: HTTP 503 SlowDown"
    ):
        raise presigned_http.refused(get(serving), "fetching x")
    assert serving.requests == 3


def test_client_does_not_retry_what_retrying_cannot_fix(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(403, b"<Code>AccessDenied</Code>", 25)]
    error = presigned_http.refused(get(serving), "fetching x")
    assert str(error) == "fetching x failed: HTTP 403 AccessDenied" and serving.requests == 1


def test_unreachable_storage_is_a_transfer_error_after_every_attempt() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    pool = presigned_http.pool_manager(1, 2)
    with pytest.raises(presigned_http.TransferError, match="fetching x failed after 2 attempts"):
        presigned_http.request(pool, "GET", f"http://127.0.0.1:{port}/k", "fetching x")


def test_urls_are_shown_without_their_signature() -> None:
    url = "http://s3.local:9000/b/k/data/model.pt?X-Amz-Signature=secret&X-Amz-Credential=key"
    assert presigned_http.where(url) == "http://s3.local:9000/b/k/data/model.pt"


def test_s3_error_documents_are_summarised() -> None:
    body = (
        b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
    )
    assert presigned_http.s3_error(body) == "AccessDenied: Request has expired"
    assert presigned_http.s3_error(b"plain text") == "plain text"


def unreachable() -> EndpointConnectionError:
    return EndpointConnectionError(endpoint_url="http://127.0.0.1:1")


def client_error(status: int, code: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "UploadPart"
    )


def test_store_calls_outlast_a_brief_outage() -> None:
    attempt, calls = flaky([unreachable(), client_error(503, "SlowDown"), unreachable()])
    assert s3_retry.call("uploading part 1", "s3://b", attempt, outage_seconds=60) == "ok"
    assert len(calls) == 4


def test_store_calls_give_up_once_the_outage_lasts_too_long() -> None:
    attempt, calls = flaky([unreachable()] * 3)
    with pytest.raises(S3StorageError, match="unreachable after retries") as info:
        s3_retry.call("uploading part 1", "s3://b", attempt, outage_seconds=0)
    assert info.value.transient and len(calls) == 1


@pytest.mark.parametrize(
    ("error", "transient"),
    [(client_error(500, "InternalError"), True), (client_error(400, "RequestTimeout"), True),
     (client_error(403, "AccessDenied"), False), (client_error(400, "InvalidPart"), False)],
)  # fmt: skip
def test_only_transient_failures_are_tried_again(error: ClientError, transient: bool) -> None:
    assert getattr(explain(error, "x", "s3://b"), "transient", False) is transient
    attempt, calls = flaky([error])
    if transient:
        assert s3_retry.call("x", "s3://b", attempt, outage_seconds=60) == "ok"
    else:
        with pytest.raises(OSError):
            s3_retry.call("x", "s3://b", attempt, outage_seconds=60)
    assert len(calls) == (2 if transient else 1)


def test_parts_grow_only_past_the_part_limit() -> None:
    assert part_size_for(20 * MiB, 8 * MiB) == 8 * MiB
    assert part_size_for(10_000 * 8 * MiB, 8 * MiB) == 8 * MiB
    grown = part_size_for(200 * 1024 * MiB, 8 * MiB)
    assert grown % MiB == 0 and grown * 10_000 >= 200 * 1024 * MiB > (grown - MiB) * 10_000


def streamed(server: http.server.ThreadingHTTPServer) -> Iterator[bytes]:
    """Bytes 0-5 of an object on the scripted server, as the store streams a client's range."""
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{server.server_port}",
        aws_access_key_id="k",
        aws_secret_access_key="s",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, s3={"addressing_style": "path"}),
    )
    return stream_range(
        client, bucket="b", key="k", where="s3://b", start=0, end=6, piece_size=3, outage_seconds=0
    )


def test_a_streamed_range_reads_on_from_where_its_body_was_cut(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(206, b"abc", 6), (206, b"def", 3)]  # cut after 3 of 6 bytes, then the rest
    pieces = streamed(serving)
    assert b"".join(pieces) == b"abcdef"
    assert serving.requests == 2


def test_a_streamed_range_gives_up_on_bodies_cut_with_nothing_read(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(206, b"", 6)] * 3
    pieces = streamed(serving)
    with pytest.raises(OSError, match="reading k in s3://b failed at byte 0"):
        b"".join(pieces)
    assert serving.requests == 3


def ranged(server: http.server.ThreadingHTTPServer, end: int = 6, max_attempts: int = 3) -> bytes:
    pool = presigned_http.pool_manager(1, max_attempts)
    url = f"http://127.0.0.1:{server.server_port}/k"
    return b"".join(presigned_http.get_range(pool, url, 0, end, "fetching x", piece_size=3))


def test_a_presigned_download_reads_on_from_where_its_body_was_cut(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(206, b"abc", 6), (206, b"def", 3)]  # cut after 3 of 6 bytes, then the rest
    assert ranged(serving) == b"abcdef"
    assert serving.ranges == ["bytes=0-5", "bytes=3-5"]


def test_a_presigned_download_of_a_shorter_object_says_how_many_bytes_came(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(206, b"abc", 3)]
    with pytest.raises(presigned_http.ShortBody, match="storage answered 3 bytes") as caught:
        ranged(serving)
    assert caught.value.got == 3 and serving.requests == 1


def test_a_presigned_download_gives_up_on_bodies_cut_with_nothing_read(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(206, b"", 6)] * 3
    with pytest.raises(presigned_http.TransferError, match="fetching x failed at byte 0 after 3 attempts"):
        ranged(serving)
    assert serving.requests == 3


def test_a_presigned_download_refused_is_not_read_on(serving) -> None:  # type: ignore[no-untyped-def]
    serving.script = [(403, b"<Code>AccessDenied</Code>", 25)]
    with pytest.raises(presigned_http.TransferError, match="fetching x failed: HTTP 403 AccessDenied"):
        ranged(serving)
    assert serving.requests == 1
