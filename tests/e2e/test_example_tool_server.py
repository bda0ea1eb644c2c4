"""``examples/image_tool_server.py`` does what its docstring says: run as a stdio server on a data directory,
the PNGs it renders are listed by ``blobstore ls`` (against ``blobstore serve`` on that directory) and by
``blobstore mcp``; with its own namespace, by ``blobstore mcp --namespace`` of that namespace."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.fixtures.commands import run_cli
from tests.fixtures.server import BLOBSTORE, cli_env, start_server, stop_server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "image_tool_server.py"


def store_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBSTORE_")}
    env["BLOBSTORE_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


async def render_with_the_example(env: dict[str, str], seed: int) -> None:
    """What a host does with the docstring's config: start the example on stdio and call its tool."""
    params = StdioServerParameters(command=sys.executable, args=[str(EXAMPLE)], env=env)
    async with Client(params) as client:
        result = await client.call_tool(
            "render_heatmap", {"width": 160, "height": 90, "cell": 10, "seed": seed}
        )
    assert not result.is_error, result.content


async def names_via_blobstore_mcp(data_dir: Path, *args: str) -> list[str]:
    params = StdioServerParameters(
        command=str(BLOBSTORE), args=["mcp", "--data-dir", str(data_dir), *args], env=store_env(data_dir)
    )
    async with Client(params) as client:
        return [resource.name for resource in (await client.list_resources()).resources]


async def test_the_examples_pngs_are_listed_by_blobstore_ls_and_blobstore_mcp(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await render_with_the_example(store_env(data_dir), seed=5)

    server = start_server(tmp_path)
    try:
        listed = run_cli(["ls", "--json"], cli_env(tmp_path, server.url))
    finally:
        stop_server(server)
    assert listed.returncode == 0, listed.stderr
    assert [item["name"] for item in json.loads(listed.stdout)["items"]] == ["heatmap-5.png"]
    assert await names_via_blobstore_mcp(data_dir) == ["heatmap-5.png"]


async def test_with_its_own_namespace_the_examples_pngs_are_read_with_that_namespace(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await render_with_the_example(store_env(data_dir, BLOBSTORE_MCP_NAMESPACE="heatmaps"), seed=6)

    assert await names_via_blobstore_mcp(data_dir, "--namespace", "heatmaps") == ["heatmap-6.png"]
    assert await names_via_blobstore_mcp(data_dir) == []
