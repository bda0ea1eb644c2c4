"""A small MCP server for the proxy's tests, run as a real child process (stdio) behind ``blobstore proxy``.

It returns what real servers return and hosts choke on: oversized images, audio, text and embedded blobs,
``structuredContent`` with an ``outputSchema`` duplicating a payload, progress notifications and a sampling
request. Payloads are deterministic (seeded), so a direct call and a proxied one can be compared.

``python upstream_server.py [--clash]``: with ``--clash`` it also offers a tool named ``read_artifact``.
"""

from __future__ import annotations

import base64
import io
import os
import random
import struct
import sys
import warnings
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    EmbeddedResource,
    GetPromptRequestParams,
    GetPromptResult,
    ImageContent,
    ListPromptsResult,
    ListResourcesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
)

warnings.simplefilter("ignore")

ANY_OBJECT: dict[str, Any] = {"type": "object"}


def takes(**types: str) -> dict[str, Any]:
    """The input schema of a tool whose arguments have these JSON types."""
    return {"type": "object", "properties": {name: {"type": kind} for name, kind in types.items()}}


def photo_png(width: int, height: int, seed: int = 1) -> bytes:
    """A photo-like PNG: smooth gradients plus sensor-like noise, so it compresses like a photograph."""
    from PIL import Image

    rng = random.Random(seed)
    small = Image.new("RGB", (16, 12))
    small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(16 * 12)])
    base = small.resize((width, height), Image.Resampling.BICUBIC)
    noise = Image.frombytes("L", (width, height), rng.randbytes(width * height)).convert("RGB")
    image = Image.blend(base, noise, 0.06)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def wav(seconds: float, rate: int = 16000) -> bytes:
    rng = random.Random(3)
    frames = int(seconds * rate)
    samples = b"".join(struct.pack("<h", rng.randrange(-8000, 8000)) for _ in range(frames))
    header = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt "
    header += (
        struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(samples))
    )
    return header + samples


def text_of(size: int) -> str:
    line = "The quick brown fox jumps over the lazy dog. 0123456789\n"
    return (line * (size // len(line) + 1))[:size]


def pdf_like(size: int) -> bytes:
    rng = random.Random(5)
    return b"%PDF-1.7\n" + rng.randbytes(size - 9)


TOOLS = [
    Tool(name="echo", description="Echo the text back.", input_schema=takes(text="string")),
    Tool(
        name="photo", description="A photo-like PNG.", input_schema=takes(width="integer", height="integer")
    ),
    Tool(name="audio", description="A WAV recording.", input_schema=takes(seconds="number")),
    Tool(name="big_text", description="A long text.", input_schema=takes(size="integer")),
    Tool(name="pdf", description="An embedded PDF blob.", input_schema=takes(size="integer")),
    Tool(
        name="structured",
        description="A small image in content and again in structuredContent.",
        input_schema=ANY_OBJECT,
        output_schema={
            "type": "object",
            "properties": {
                "content": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "type": {"type": "string"},
                            "data": {"type": "string"},
                            "mimeType": {"type": "string"},
                        },
                        "required": ["type"],
                    },
                },
                "label": {"type": "string"},
            },
            "required": ["content", "label"],
        },
    ),
    Tool(name="progress", description="Reports progress, then answers.", input_schema=takes(steps="integer")),
    Tool(
        name="sample",
        description="Asks the host's model (sampling) and returns its answer.",
        input_schema=takes(prompt="string"),
    ),
    Tool(name="die", description="Exits the server in the middle of the call.", input_schema=ANY_OBJECT),
    Tool(
        name="block",
        description="Writes 'started' to the file `marker`, waits until cancelled, then writes 'cancelled'.",
        input_schema=takes(marker="string"),
    ),
]

RESOURCES = [
    Resource(uri="test://small.txt", name="small.txt", mime_type="text/plain"),
    Resource(uri="test://big.bin", name="big.bin", mime_type="application/octet-stream"),
]


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    tools = list(TOOLS)
    if "--clash" in sys.argv:
        tools.append(
            Tool(name="read_artifact", description="The upstream's own read tool.", input_schema=ANY_OBJECT)
        )
    return ListToolsResult(tools=tools)


async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return CallToolResult(content=[TextContent(text=str(args.get("text", "")))])
    if name == "read_artifact":
        return CallToolResult(content=[TextContent(text="upstream read_artifact")])
    if name == "photo":
        data = photo_png(int(args.get("width", 3000)), int(args.get("height", 2000)))
        return CallToolResult(
            content=[ImageContent(data=base64.b64encode(data).decode(), mime_type="image/png")]
        )
    if name == "audio":
        data = wav(float(args.get("seconds", 30)))
        return CallToolResult(
            content=[AudioContent(data=base64.b64encode(data).decode(), mime_type="audio/wav")]
        )
    if name == "big_text":
        return CallToolResult(content=[TextContent(text=text_of(int(args.get("size", 2_000_000))))])
    if name == "pdf":
        data = pdf_like(int(args.get("size", 5_000_000)))
        blob = BlobResourceContents(
            uri="test://report.pdf", mime_type="application/pdf", blob=base64.b64encode(data).decode()
        )
        return CallToolResult(content=[EmbeddedResource(resource=blob)])
    if name == "structured":
        encoded = base64.b64encode(photo_png(64, 48)).decode()
        block = {"type": "image", "data": encoded, "mimeType": "image/png"}
        return CallToolResult(
            content=[ImageContent(data=encoded, mime_type="image/png")],
            structured_content={"content": [block], "label": "small"},
        )
    if name == "progress":
        steps = int(args.get("steps", 3))
        for step in range(1, steps + 1):
            await ctx.session.report_progress(float(step), float(steps), f"step {step}")
        return CallToolResult(content=[TextContent(text=f"done after {steps} steps")])
    if name == "sample":
        answer = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(text=str(args.get("prompt", ""))))],
            max_tokens=50,
        )
        content = answer.content
        text = content.text if isinstance(content, TextContent) else repr(content)
        return CallToolResult(content=[TextContent(text=f"model said: {text}")])
    if name == "die":
        os._exit(3)
    if name == "block":
        marker = anyio.Path(str(args["marker"]))
        await marker.write_text("started")
        try:
            # The behaviour under test: a tool call that never answers, until it is cancelled or killed.
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await marker.write_text("cancelled")
    return CallToolResult(content=[TextContent(text=f"unknown tool {name}")], is_error=True)


async def list_resources(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListResourcesResult:
    return ListResourcesResult(resources=RESOURCES)


async def read_resource(
    ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
) -> ReadResourceResult:
    if params.uri == "test://small.txt":
        return ReadResourceResult(
            contents=[TextResourceContents(uri=params.uri, mime_type="text/plain", text="hello")]
        )
    data = pdf_like(3_000_000)
    return ReadResourceResult(
        contents=[
            BlobResourceContents(
                uri=params.uri, mime_type="application/octet-stream", blob=base64.b64encode(data).decode()
            )
        ]
    )


async def list_prompts(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListPromptsResult:
    return ListPromptsResult(prompts=[Prompt(name="greet", description="Say hello.")])


async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> GetPromptResult:
    return GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(text="Say hello."))])


def build() -> Server[Any]:
    return Server(
        "proxy-test-upstream",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def main() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
