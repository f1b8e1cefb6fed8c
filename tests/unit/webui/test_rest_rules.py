"""Determined's REST shapes pedl answers in, free of any server: errors, pages, model definitions."""

from __future__ import annotations

import base64
import io
import json
import tarfile

import pytest

from pedl_webui.gateway import GatewayError
from pedl_webui.rest import errors
from pedl_webui.rest.common import page
from pedl_webui.rest.projects import model_definition_archive


def test_an_error_is_grpc_gateways_shape_and_the_masters_so_determineds_client_prints_it() -> None:
    response = errors.response(404, "experiment 9 not found")
    body = json.loads(bytes(response.body))
    assert response.status_code == 404
    assert body == {
        "code": 5,
        "message": "experiment 9 not found",
        "details": [],
        "error": {"code": 5, "reason": "NotFound", "error": "experiment 9 not found"},
    }
    assert (
        errors.lacking("notebooks").status == 501
        and "pedl has no notebooks" in errors.lacking("notebooks").message
    )


def test_pages_say_where_they_are_in_the_whole() -> None:
    rows = list(range(10))
    assert page(rows, 0, 3, "x") == {
        "x": [0, 1, 2],
        "pagination": {"offset": 0, "limit": 3, "startIndex": 0, "endIndex": 3, "total": 10},
    }
    assert page(rows, 8, 5, "x")["x"] == [8, 9] and page(rows, 8, 5, "x")["pagination"]["endIndex"] == 10
    assert page(rows, -2, 0, "x")["x"] == [8, 9]  # a negative offset counts from the end
    assert page(rows, 0, 0, "x")["x"] == rows  # limit 0: all


def _file(path: str, data: bytes = b"", kind: int = ord("0")) -> dict[str, object]:
    return {"path": path, "type": kind, "content": base64.b64encode(data).decode(), "mode": 0o644,
            "mtime": 0, "uid": 0, "gid": 0}  # fmt: skip


def test_determineds_model_definition_files_become_the_archive_pedl_runs() -> None:
    archive = model_definition_archive([_file("pkg", kind=ord("5")), _file("pkg/model_def.py", b"x = 1\n")])
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert tar.getnames() == ["pkg", "pkg/model_def.py"]
        assert tar.extractfile("pkg/model_def.py").read() == b"x = 1\n"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("files", "status", "words"),
    [
        ([_file("../escape.py", b"x")], 400, "inside the context"),
        ([_file("/abs.py", b"x")], 400, "inside the context"),
        ([{**_file("a.py"), "content": "not base64!"}], 400, "not base64"),
        ([{**_file("a.py"), "colour": 1}], 400, 'unknown field "colour"'),
        ([_file("link", kind=ord("2"))], 400, "a file (48) or a directory (53)"),
        ([_file("big.bin", b"x" * 2048)], 413, "over 0.000976562 MiB"),
    ],
)
def test_a_bad_or_too_large_model_definition_is_refused_with_one_line(
    files: list[dict[str, object]], status: int, words: str
) -> None:
    with pytest.raises(GatewayError) as e:
        model_definition_archive(files, max_bytes=1024)
    assert e.value.status == status and words in e.value.message


def test_a_log_line_is_one_ndjson_result_as_determineds_client_reads_it() -> None:
    from pedl.v1 import common_pb2
    from pedl_webui.rest.shapes import log_ndjson

    line = common_pb2.LogLine(
        id=7, trial_id=3, timestamp="2026-01-02T00:01:00Z", source="stderr", message='say "hi"\t'
    )
    text = log_ndjson(line)
    assert text.endswith("}\n") and text.count("\n") == 1
    result = json.loads(text)["result"]
    assert result["id"] == "7" and result["trialId"] == 3  # int64 as a string, int32 as a number
    assert result["message"] == 'say "hi"\t\n' and result["log"] == 'say "hi"\t'
    assert result["level"] == "LOG_LEVEL_ERROR" and result["stdtype"] == "stderr"
