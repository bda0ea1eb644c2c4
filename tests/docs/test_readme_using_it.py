"""The README's answers to a new user's first questions, run as written: how to point the commands at a server
on another port (``--url``, ``BLOBSTORE_URL``), how long artifacts live and how to change or pin that, and
``blobstore call`` against an example server and this store's ``/mcp``.

The documented port (8421) is a free one here, and the documented artifact id (``a_Xb3…``) the one the
block's own upload printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import pytest

from blobstore.config import Settings
from tests.fixtures.server import Server, isolated_env, serving

ROOT: Final = Path(__file__).resolve().parents[2]
README: Final = (ROOT / "README.md").read_text(encoding="utf-8")
USING_IT: Final = README[README.index("## Using it") : README.index("## Documentation")]
BLOCKS: Final = re.findall(r"```sh\n(.*?)```", USING_IT, re.DOTALL)
DOCUMENTED_PORT: Final = "8421"
PLACEHOLDER: Final = "a_Xb3\u2026"
SHORT_TTL: Final = 7200


def block(containing: str) -> list[str]:
    (found,) = [b for b in BLOCKS if containing in b]
    return [line for line in found.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on a port of its own, with a default lifetime changed as the README says it can be."""
    with serving(
        tmp_path_factory.mktemp("readme"), env={"BLOBSTORE_DEFAULT_TTL_SECONDS": str(SHORT_TTL)}
    ) as running:
        yield running


def shell(line: str, cwd: Path, env: dict[str, str], server: Server, artifact: str | None) -> str:
    port = server.url.rsplit(":", 1)[1]
    command = line.replace(f"127.0.0.1:{DOCUMENTED_PORT}", f"127.0.0.1:{port}")
    if artifact is not None:
        command = command.replace(PLACEHOLDER, artifact)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def expires_within(artifact: dict[str, str], ttl: int, before: datetime, after: datetime) -> bool:
    """Whether the artifact expires ``ttl`` seconds after a moment of its upload (between ``before`` and
    ``after``: the lifetime runs from when the upload began)."""
    expires = datetime.fromisoformat(artifact["expires_at"])
    return before + timedelta(seconds=ttl) <= expires <= after + timedelta(seconds=ttl)


def test_another_port_a_lifetime_and_a_pin(server: Server, tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(2048))
    env = isolated_env({"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)})
    lines = block("--ttl 3600")
    assert lines[1].startswith("export BLOBSTORE_URL=")
    # The export carries over to the lines after it, as in one shell.
    exported = {
        **env,
        "BLOBSTORE_URL": lines[1].split("=", 1)[1].replace(DOCUMENTED_PORT, server.url.rsplit(":", 1)[1]),
    }

    shell(lines[0], tmp_path, env, server, None)  # --url, before anything is uploaded: an empty listing
    before = datetime.now(UTC)
    uploaded = shell(lines[2], tmp_path, exported, server, None)
    after = datetime.now(UTC)
    artifact_id = uploaded.split()[0]
    shell(lines[3], tmp_path, exported, server, artifact_id)

    info = json.loads(shell(f"blobstore info {artifact_id} --json", tmp_path, exported, server, None))
    assert info["pinned"] is True
    assert expires_within(info, 3600, before, after)  # the upload's --ttl
    before = datetime.now(UTC)
    default = shell("blobstore upload report.pdf --name other.pdf --json", tmp_path, exported, server, None)
    after = datetime.now(UTC)
    assert expires_within(json.loads(default)[0]["artifact"], SHORT_TTL, before, after)  # the changed default


def test_the_documented_default_lifetime_is_the_settings() -> None:
    assert Settings().default_ttl_seconds == 7 * 24 * 3600
    assert "| `BLOBSTORE_DEFAULT_TTL_SECONDS` | `604800` (7 days) |" in README
    assert Settings().max_ttl_seconds == 90 * 24 * 3600
    assert "| `BLOBSTORE_MAX_TTL_SECONDS` | `7776000` (90 days) |" in README


def test_blobstore_call_against_the_example_server_and_the_stores_mcp(server: Server, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    env = isolated_env(
        {
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "BLOBSTORE_DATA_DIR": str(server.data_dir),
        }
    )
    example, store = block("blobstore call render_heatmap")

    rendered = shell(example, tmp_path, env, server, None)
    found = re.search(r"original: blobstore://artifacts/(a_[A-Za-z0-9_-]+)", rendered)
    assert found is not None, rendered
    read = shell(store, tmp_path, env, server, found.group(1))

    assert re.search(
        r"^Content 1 \(Resource\): blobstore://\S+, image/png, [\d,]+ bytes, 800\u00d7600 px", read, re.M
    )
    assert (tmp_path / "render_heatmap_1.png").is_file()
    assert (tmp_path / "read_artifact_1.png").is_file()
