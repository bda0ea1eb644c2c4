"""Run by the langchain-mcp-adapters virtualenv (tests/langchain/adapters/.venv), not by the store's: a
LangChain tool list built from an MCP server with ``MultiServerMCPClient``, used as an agent would use it.

Reads one JSON object on standard input (``server``: the stdio command, its arguments and environment;
``artifact``: an artifact URI to read) and prints what the LangChain side received, as JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient


def kinds(blocks: Any) -> list[str]:
    return [block["type"] for block in blocks] if isinstance(blocks, list) else ["str"]


async def main(job: dict[str, Any]) -> dict[str, Any]:
    server = job["server"]
    client = MultiServerMCPClient(
        {
            "media": {
                "transport": "stdio",
                "command": server["command"],
                "args": server["args"],
                "env": server["env"],
            }
        }
    )
    tools = {tool.name: tool for tool in await client.get_tools()}
    blobs = await client.get_resources("media", uris=[job["artifact"]])
    read = await tools["read_artifact"].ainvoke({"uri": job["artifact"]})
    small = await tools["generate_image"].ainvoke({"prompt": "small", "width": 64, "height": 48})
    large = await tools["generate_image"].ainvoke(
        {"prompt": "large", "style": "noise", "width": 1600, "height": 1600}
    )
    linked = next(block for block in large if block["type"] == "image")
    analyzed = await tools["analyze_image"].ainvoke({"image": linked["url"], "question": "what is it?"})
    return {
        "tools": sorted(tools),
        "image_schema": tools["analyze_image"].args_schema["properties"]["image"],
        "resource_sha256": [hashlib.sha256(blob.as_bytes()).hexdigest() for blob in blobs],
        "read_kinds": kinds(read),
        "small_kinds": kinds(small),
        "small_image": next(
            {"mime_type": block.get("mime_type"), "base64": "base64" in block, "url": block.get("url")}
            for block in small
            if block["type"] == "image"
        ),
        "large_kinds": kinds(large),
        "linked": {
            "url": linked.get("url"),
            "mime_type": linked.get("mime_type"),
            "base64": "base64" in linked,
        },
        "analyzed": analyzed,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
