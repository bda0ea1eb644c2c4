"""How a newcomer gets the ``blobstore`` command after the README install: the install puts it in
``.venv/bin`` only; activating the virtualenv (README, "Using it") puts it on ``PATH``, and the host config of
docs/mcp.md names it by its full path, which works for a host that has neither ``PATH`` nor the virtualenv."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.fixtures.commands import run_command

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MCP_DOC = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
# The environment a host or a fresh shell has: system directories only, no virtualenv.
BARE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home())}


def checkout_with_the_readme_install(tmp_path: Path) -> Path:
    """A directory where ``.venv`` is the virtualenv the README's install made (this run's)."""
    assert "python3 -m venv .venv && .venv/bin/pip install ." in README
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    assert (tmp_path / ".venv" / "bin" / "blobstore").is_file()
    return tmp_path


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_command(["bash", "-c", script], env=BARE_ENV, cwd=cwd)


def test_after_the_readme_install_activating_the_virtualenv_puts_blobstore_on_path(tmp_path: Path) -> None:
    checkout = checkout_with_the_readme_install(tmp_path)
    using_it = README[README.index("## Using it") : README.index("## Documentation")]
    (activate,) = re.findall(r"^\. \.venv/bin/activate$", using_it, re.MULTILINE)

    assert bash("command -v blobstore", checkout).returncode != 0  # not on PATH by itself
    activated = bash(f"{activate} && blobstore --version", checkout)
    assert activated.returncode == 0, activated.stderr
    assert activated.stdout.startswith("blobstore")
    by_path = bash(".venv/bin/blobstore --version", checkout)
    assert by_path.returncode == 0, by_path.stderr


async def test_the_host_config_with_the_full_path_starts_blobstore_mcp_without_path(tmp_path: Path) -> None:
    checkout = checkout_with_the_readme_install(tmp_path / "checkout")
    (block,) = [b for b in re.findall(r"```json\n(.*?)```", MCP_DOC, re.DOTALL) if "mcpServers" in b]
    server = json.loads(block)["mcpServers"]["blobstore"]
    documented = Path(server["command"])
    assert documented.is_absolute()
    assert documented.parts[-3:] == (".venv", "bin", "blobstore")
    # The documented checkout (/home/me/mcp-blobstore) is this one.
    command = checkout.joinpath(*documented.parts[-3:])
    data_dir = tmp_path / "data"
    args = [str(data_dir) if arg.endswith("/.local/share/mcp-blobstore") else arg for arg in server["args"]]
    params = StdioServerParameters(command=str(command), args=args, env=BARE_ENV)
    async with Client(params) as client:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
    assert listed.resources == []
    # The store's own templates: byte windows first, then the views (their full list is docs/views.md's).
    uris = [t.uri_template for t in templates.resource_templates]
    assert uris[0] == "blobstore://artifacts/{artifact_id}{?offset,length}"
    assert {
        "blobstore://artifacts/{artifact_id}/pages/{page}.txt",
        "blobstore://artifacts/{artifact_id}/pages/{page}.png",
        "blobstore://artifacts/{artifact_id}/pages/{page}/ocr.json",
        "blobstore://artifacts/{artifact_id}/audio{?start,duration}",
        "blobstore://artifacts/{artifact_id}/transcript{?start,duration}",
    } <= set(uris)
