"""An MCP server whose tools make an artifact and take one back, run as a child behind ``blobstore proxy``.

``make_screenshot`` returns a 3000 by 2000 PNG made with Pillow; ``checksum_image`` takes a PNG as base64 (its
``image`` declared ``contentEncoding: base64``, ``contentMediaType: image/png``) and returns the SHA-256 of
the bytes it got; ``annotate`` takes a plain string and returns it. The tools are listed in two pages, the
binary one on the first. ``python artifact_tools_upstream.py RECORD``: every call is appended to RECORD as a
JSON line (the tool, and each argument's length and SHA-256), so a test can tell what reached the upstream.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

# Run as a script: the repository root makes the test package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.proxy.upstream_server import photo_png

warnings.simplefilter("ignore")

SCREENSHOT_SIZE = (3000, 2000)
IMAGE_DESCRIPTION = "The PNG to check, base64"
NOTE_DESCRIPTION = "A note to keep"

FIRST_PAGE = [
    Tool(name="make_screenshot", description="Take a screenshot.", input_schema={"type": "object"}),
    Tool(
        name="checksum_image",
        description="The SHA-256 of an image.",
        input_schema={
            "type": "object",
            "properties": {
                "image": {
                    "type": "string",
                    "contentEncoding": "base64",
                    "contentMediaType": "image/png",
                    "description": IMAGE_DESCRIPTION,
                }
            },
            "required": ["image"],
        },
    ),
]
SECOND_PAGE = [
    Tool(
        name="annotate",
        description="Keep a note.",
        input_schema={
            "type": "object",
            "properties": {"note": {"type": "string", "description": NOTE_DESCRIPTION}},
            "required": ["note"],
        },
    )
]


def record(path: Path, tool: str, arguments: dict[str, Any]) -> None:
    seen = {
        name: {"length": len(value), "sha256": hashlib.sha256(value.encode()).hexdigest(), "head": value[:80]}
        for name, value in arguments.items()
        if isinstance(value, str)
    }
    with path.open("a") as out:
        out.write(json.dumps({"tool": tool, "arguments": seen}) + "\n")


def build(recorded: Path) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        if params is not None and params.cursor == "2":
            return ListToolsResult(tools=SECOND_PAGE)
        return ListToolsResult(tools=FIRST_PAGE, next_cursor="2")

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        arguments = params.arguments or {}
        record(recorded, params.name, arguments)
        if params.name == "make_screenshot":
            png = base64.b64encode(photo_png(*SCREENSHOT_SIZE)).decode()
            return CallToolResult(content=[ImageContent(data=png, mime_type="image/png")])
        if params.name == "checksum_image":
            digest = hashlib.sha256(base64.b64decode(arguments["image"], validate=True)).hexdigest()
            return CallToolResult(content=[TextContent(text=digest)])
        if params.name == "annotate":
            return CallToolResult(content=[TextContent(text=str(arguments["note"]))])
        return CallToolResult(content=[TextContent(text=f"no tool {params.name}")], is_error=True)

    return Server("artifact-tools", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(recorded: Path) -> None:
    server = build(recorded)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
