"""One JSON call to a REST front, as Determined's client makes it: for tests that check status and body."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def rest_call(url: str, token: str | None, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body); an error status is returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
