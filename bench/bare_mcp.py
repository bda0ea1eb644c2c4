"""The least stdio MCP server a window can come from: a ceiling for ``bench/run.py``'s MCP windows row.

It answers ``initialize`` and every ``resources/read`` with one prepared answer: a 1 MiB window of random
bytes, base64 in a JSON line, built once at start. Per request it reads the request's line, finds its id and
writes the answer's line to stdout (its pipe widened as ``blobstore mcp`` widens its own). No lookup, read,
check, digest, encoding, validation or log: what is left of a window's time is the pipe and the client.

    python bench/bare_mcp.py    # then speak JSON-RPC on its stdin and stdout
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import sys

WINDOW = 1024 * 1024
PIPE_SIZE = 2 * 1024 * 1024


def widen(fd: int) -> None:
    """As ``mcp_resources.transports.stdio`` does: as large a pipe as the system lets an unprivileged process
    make."""
    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as limit:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(int(limit.read()), PIPE_SIZE))
    except OSError:
        pass


def main() -> None:
    blob = base64.b64encode(os.urandom(WINDOW)).decode()
    contents = [{"uri": "bare://window", "mimeType": "application/octet-stream", "blob": blob}]
    window_tail = json.dumps({"result": {"contents": contents}}, separators=(",", ":"))[1:].encode() + b"\n"
    out = sys.stdout.buffer
    widen(out.fileno())
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode() + b","
        if message.get("method") == "initialize":
            info = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"resources": {}},
            }
            info["serverInfo"] = {"name": "bare", "version": "1"}
            out.write(head + json.dumps({"result": info})[1:].encode() + b"\n")
        else:
            out.write(head + window_tail)
        out.flush()


if __name__ == "__main__":
    main()
