"""An ``MCPServer`` (the SDK's high-level server) run as a child behind ``blobstore proxy`` over stdio.

Its tool ``long_text`` returns a ``str``, which the SDK puts in ``content`` as a text block and mirrors in
``structuredContent`` (``{"result": ...}``, under the ``outputSchema`` it derives from the return type): the
text comes twice in one result, as it does from every such tool. ``python mcpserver_upstream.py``.
"""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import MCPServer

warnings.simplefilter("ignore")

server = MCPServer("long-text")


def numbered_lines(chars: int) -> str:
    """``chars`` characters of numbered lines, the same for the same ``chars``."""
    out: list[str] = []
    length = 0
    number = 0
    while length < chars:
        line = f"line {number:06d}: the quick brown fox jumps over the lazy dog\n"
        out.append(line)
        length += len(line)
        number += 1
    return "".join(out)[:chars]


@server.tool()
def long_text(chars: int) -> str:
    """``chars`` characters of numbered lines."""
    return numbered_lines(chars)


if __name__ == "__main__":
    server.run()
