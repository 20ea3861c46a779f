"""Fetching an issued link as a researcher's client would: a portal URL through the test client (local
storage), a presigned URL from the S3 gateway."""

from __future__ import annotations

import httpx


def fetch(client, url: str) -> tuple[int, bytes]:
    if url.startswith("/") or url.startswith("http://testserver/"):
        response = client.get(url.removeprefix("http://testserver"))
        body = b"".join(response.streaming_content) if response.streaming else response.content
        return response.status_code, body
    response = httpx.get(url)
    return response.status_code, response.content
