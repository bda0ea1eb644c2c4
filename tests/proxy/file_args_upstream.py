"""An MCP server whose tools take a file path or a URL, run as a child behind ``blobstore proxy``.

- ``stat_file(path)`` answers, as JSON, what it finds at ``path``: its mode, size, SHA-256 and name;
- ``stat_then_fail(path)`` records the same and answers a tool error;
- ``stat_then_die(path)`` records the same and exits the process without answering;
- ``stat_then_wait(path)`` records the same and never answers (a test cancels it);
- ``fetch(url)`` GETs ``url`` and answers the URL, the status and the SHA-256 of the body.

``python file_args_upstream.py RECORD``: each ``stat_*`` tool appends its finding to RECORD as a JSON line
before it answers, so a test can tell what the upstream saw even when it gets no answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

warnings.simplefilter("ignore")

PATH_DESCRIPTION = "The file to look at"
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": PATH_DESCRIPTION}},
    "required": ["path"],
}
URL_SCHEMA = {
    "type": "object",
    "properties": {"url": {"type": "string", "format": "uri"}},
    "required": ["url"],
}
STAT_TOOLS = ("stat_file", "stat_then_fail", "stat_then_die", "stat_then_wait")
TOOLS = [
    *(Tool(name=name, description="Look at a file.", input_schema=PATH_SCHEMA) for name in STAT_TOOLS),
    Tool(name="fetch", description="Fetch a URL.", input_schema=URL_SCHEMA),
]


def look(path: str) -> dict[str, Any]:
    found = Path(path)
    info = found.stat()
    digest = hashlib.sha256()
    with found.open("rb") as data:
        while block := data.read(1024 * 1024):
            digest.update(block)
    return {
        "path": path,
        "absolute": found.is_absolute(),
        "name": found.name,
        "mode": oct(stat.S_IMODE(info.st_mode)),
        "size": info.st_size,
        "sha256": digest.hexdigest(),
    }


def fetch(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            body = response.read()
            return {"url": url, "status": response.status, "sha256": hashlib.sha256(body).hexdigest()}
    except urllib.error.HTTPError as exc:
        return {"url": url, "status": exc.code, "sha256": None}


def build(recorded: Path) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        arguments = params.arguments or {}
        if params.name == "fetch":
            found = await anyio.to_thread.run_sync(fetch, str(arguments["url"]))
            return CallToolResult(content=[TextContent(text=json.dumps(found))])
        seen = look(str(arguments["path"]))
        with recorded.open("a") as out:
            out.write(json.dumps({"tool": params.name, **seen}) + "\n")
        if params.name == "stat_then_fail":
            return CallToolResult(content=[TextContent(text="it went wrong")], is_error=True)
        if params.name == "stat_then_die":
            os._exit(3)
        if params.name == "stat_then_wait":
            await anyio.sleep_forever()
        return CallToolResult(content=[TextContent(text=json.dumps(seen))])

    return Server("file-args", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(recorded: Path) -> None:
    server = build(recorded)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
