"""LangChain tools (``langchain-core``) served as MCP tools through ``register_langchain_tools``: typed media
arguments and results as an ``MCPServer`` tool written with the same types has them, and plain tools (what
``lc2mcp`` converts) with the schema and result LangChain gives them itself."""

from __future__ import annotations

import base64
import contextlib
import io
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.tools import BaseTool, StructuredTool, tool
from mcp import Client
from mcp.server import MCPServer
from PIL import Image as Pillow
from pydantic import BaseModel, Field

from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import Image, MediaLimits, embed_store, register_langchain_tools
from tests.handles.conftest import CALLER

CALLED: list[str] = []


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Pillow.new("RGB", (width, height), (40, 40, 200)).save(out, "PNG")
    return out.getvalue()


Png = Annotated[Image, MediaLimits(max_bytes="1MB", formats=("png",))]


@tool
async def analyze_image(image: Png, question: str) -> str:
    """Describe an image's pixels."""
    CALLED.append("analyze_image")
    await image.facts()
    return f"{image.format} {image.width}x{image.height}: {question}"


@tool
async def generate_image(prompt: str, style: str = "realistic") -> Image:
    """Draw an image for a prompt."""
    return Image(data=png(64, 48), format="png", name=f"{style}.png")


@tool
def get_weather(city: str) -> str:
    """Get current weather for a city."""
    return f"Sunny, 25°C in {city}"


class SearchArgs(BaseModel):
    query: str = Field(description="What to look for")
    limit: int = 3


class Search(BaseTool):
    name: str = "search_notes"
    description: str = "Search the notes."
    args_schema: type[BaseModel] = SearchArgs

    def _run(self, query: str, limit: int = 3) -> str:
        return f"{limit} notes about {query}"


def _lookup(term: str, limit: int = 2) -> str:
    return f"{limit} entries for {term}"


lookup = StructuredTool.from_function(
    _lookup,
    name="lookup",
    description="Look a term up.",
    # A JSON schema rather than a model, as a tool built from an MCP or OpenAPI description has.
    args_schema={
        "type": "object",
        "properties": {
            "term": {"type": "string", "description": "The term"},
            "limit": {"type": "integer", "default": 2},
        },
        "required": ["term"],
    },
)


def native(service: ArtifactService) -> MCPServer:
    """The same typed tools written for an ``MCPServer`` directly."""
    mcp = MCPServer("native")
    embed_store(mcp, service, caller=CALLER)

    @mcp.tool()
    async def analyze_image(image: Png, question: str) -> str:
        """Describe an image's pixels."""
        return question

    @mcp.tool()
    async def generate_image(prompt: str, style: str = "realistic") -> Image:
        """Draw an image for a prompt."""
        return Image(data=png(64, 48), format="png")

    return mcp


def bridged(service: ArtifactService) -> MCPServer:
    mcp = MCPServer("langchain")
    embed_store(mcp, service, caller=CALLER)
    names = register_langchain_tools(mcp, [analyze_image, generate_image, get_weather, Search(), lookup])
    assert names == ["analyze_image", "generate_image", "get_weather", "search_notes", "lookup"]
    return mcp


@contextlib.asynccontextmanager
async def store(tmp_path: Path) -> AsyncIterator[ArtifactService]:
    async with open_service(Settings(data_dir=tmp_path / "data")) as service:
        yield service


def titled_away(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema without its ``title``s (a model's name differs between the two servers)."""
    if isinstance(schema, dict):
        return {k: titled_away(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [titled_away(v) for v in schema]
    return schema


async def test_typed_langchain_tools_have_the_schemas_of_native_ones(tmp_path: Path) -> None:
    async with store(tmp_path) as service:
        async with Client(bridged(service)) as client:
            ours = {t.name: t for t in (await client.list_tools()).tools}
        async with Client(native(service)) as client:
            theirs = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("analyze_image", "generate_image"):
        assert titled_away(ours[name].input_schema) == titled_away(theirs[name].input_schema), name
        assert ours[name].output_schema == theirs[name].output_schema, name
        assert ours[name].description == theirs[name].description, name
        assert ours[name].meta == theirs[name].meta, name
    image = ours["analyze_image"].input_schema["properties"]["image"]
    assert image["x-blobstore-media"]["formats"] == ["png"]
    assert image["contentMediaType"] == "image/png"


async def test_a_typed_langchain_tool_is_checked_before_it_runs_and_its_image_is_answered(
    tmp_path: Path,
) -> None:
    CALLED.clear()
    data = png(30, 20)
    async with store(tmp_path) as service, Client(bridged(service)) as client:
        looked = await client.call_tool(
            "analyze_image", {"image": base64.b64encode(data).decode(), "question": "what is it?"}
        )
        refused = await client.call_tool(
            "analyze_image", {"image": base64.b64encode(b"GIF89a" + bytes(40)).decode(), "question": "?"}
        )
        made = await client.call_tool("generate_image", {"prompt": "blue", "style": "sketch"})
        assert made.structured_content is not None
        read = await client.read_resource(made.structured_content["result"]["uri"])
    assert looked.structured_content == {"result": "png 30x20: what is it?"}
    assert refused.is_error
    assert refused.structured_content is not None
    assert refused.structured_content["error"]["code"] == "unsupported_media"
    assert CALLED == ["analyze_image"]
    assert [block.type for block in made.content] == ["text", "image"]
    assert made.structured_content["result"]["name"] == "sketch.png"
    assert base64.b64decode(read.contents[0].blob) == png(64, 48)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("get_weather", {"city": "Paris"}),
        ("search_notes", {"query": "mcp"}),
        ("search_notes", {"query": "x", "limit": 9}),
        ("lookup", {"term": "mcp"}),
    ],
)
async def test_plain_langchain_tools_answer_as_langchain_itself_does(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    own: BaseTool = {"get_weather": get_weather, "search_notes": Search(), "lookup": lookup}[name]
    async with store(tmp_path) as service, Client(bridged(service)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}[name]
        result = await client.call_tool(name, arguments)
    # The arguments' schema is the one LangChain gives the tool a model calls it with.
    given = own.tool_call_schema
    expected = given if isinstance(given, dict) else given.model_json_schema()  # type: ignore[union-attr]
    assert titled_away(listed.input_schema)["properties"] == titled_away(expected)["properties"]
    assert listed.input_schema.get("required", []) == expected.get("required", [])
    assert listed.description == own.description
    assert result.content[0].text == await own.ainvoke(arguments)  # type: ignore[union-attr]


def test_a_plain_function_is_made_a_tool_as_tool_makes_it() -> None:
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    mcp = MCPServer("plain")
    assert register_langchain_tools(mcp, [shout], name_prefix="text.") == ["text.shout"]


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "mcp_resources.tools.langchain_bridge", raising=False)
    monkeypatch.setitem(sys.modules, "langchain_core.tools", None)
    with pytest.raises(ModuleNotFoundError, match=r"mcp-blobstore\[langchain\]"):
        register_langchain_tools(MCPServer("plain"), [])
