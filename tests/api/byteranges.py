"""A strict reader for ``multipart/byteranges`` bodies (RFC 9110 §14.6), independent of the server's code."""

from __future__ import annotations

import re

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


def boundary_from(content_type: str) -> str:
    kind, _, params = content_type.partition(";")
    assert kind.strip() == "multipart/byteranges", content_type
    name, _, value = params.strip().partition("=")
    assert name == "boundary"
    assert value
    return value


def parse_byteranges(body: bytes, boundary: str) -> list[tuple[int, int, int, str, bytes]]:
    """Parts as ``(first, last, size, content_type, data)``; asserts the framing is exact."""
    parts: list[tuple[int, int, int, str, bytes]] = []
    delimiter = f"--{boundary}".encode()
    pos = 0
    while True:
        assert body.startswith(delimiter, pos), body[pos : pos + 80]
        pos += len(delimiter)
        if body.startswith(b"--\r\n", pos):
            assert pos + 4 == len(body), "bytes after the closing delimiter"
            return parts
        assert body.startswith(b"\r\n", pos)
        head_end = body.index(b"\r\n\r\n", pos)
        headers = {}
        for line in body[pos + 2 : head_end].decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        match = _CONTENT_RANGE.fullmatch(headers["content-range"])
        assert match is not None
        first, last, size = (int(group) for group in match.groups())
        start = head_end + 4
        data = body[start : start + last - first + 1]
        assert len(data) == last - first + 1
        pos = start + len(data)
        assert body.startswith(b"\r\n", pos)
        pos += 2
        parts.append((first, last, size, headers.get("content-type", ""), data))
