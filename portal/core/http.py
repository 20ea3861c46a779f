"""Serving a stored object over HTTP with Range (browsers seek a video with it; downloads resume with it)."""

from __future__ import annotations

from django.core.files.storage import Storage
from django.http import HttpRequest, StreamingHttpResponse

from portal.core import storage


def served_span(request: HttpRequest, size: int) -> tuple[int, int] | None:
    """The bytes ``ranged_response`` serves of an object of ``size`` bytes for ``request`` (None: none, 416)."""
    return storage.parse_range(request.headers.get("Range", ""), size)


def ranged_response(request: HttpRequest, store: Storage, name: str, *, content_type: str,
                    filename: str | None = None, size: int | None = None) -> StreamingHttpResponse:
    """The object ``name``, whole (200) or the one byte range the request asks for (206; 416 when it cannot be
    satisfied), streamed without reading the rest; ``filename`` makes it an attachment; ``size``, when the caller
    read it already (to decide on ``served_span``), is taken as the object's. ``FileNotFoundError`` when the
    object is not stored."""
    size = store.size(name) if size is None else size
    span, ranged = storage.requested_span(request.headers.get("Range", ""), size)
    if span is None:
        response = StreamingHttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        return response
    start, end = span
    response = StreamingHttpResponse(storage.read_range(store, name, start, end), content_type=content_type,
                                     status=206 if ranged else 200)
    response["Accept-Ranges"] = "bytes"
    response["Content-Length"] = str(end - start + 1)
    if ranged:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    if filename is not None:
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
