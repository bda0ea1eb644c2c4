"""The other direction: the client LangChain users run, ``langchain-mcp-adapters``, builds an agent's tool
list from the store's typed media example server (``examples/media_tool_server.py`` over stdio) and uses it:
it reads an artifact (as a resource and through the read tool), receives an image block and a
``resource_link``, and passes the link's artifact URI to a typed tool. No model is involved: the calls are the
ones an agent makes.

The adapters need ``mcp<2`` and the store pins ``mcp`` 2.x, so they live in a virtualenv of their own,
``tests/langchain/adapters/.venv``, which ``.ci/run`` makes from
``tests/langchain/adapters/requirements.txt``; ``agent_tools.py`` runs there."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from tests.fixtures.server import isolated_env
from tests.handles.conftest import put

HERE = Path(__file__).resolve().parent
ADAPTERS_PYTHON = HERE / "adapters" / ".venv" / "bin" / "python"
EXAMPLE = HERE.parents[1] / "examples" / "media_tool_server.py"
NOTES = b"meeting notes: ship typed media\n" * 8


async def test_a_langchain_tool_list_from_the_store_reads_receives_and_passes_artifacts(
    tmp_path: Path,
) -> None:
    assert ADAPTERS_PYTHON.exists(), (
        f"{ADAPTERS_PYTHON} is missing: .ci/run makes it (python3 -m venv tests/langchain/adapters/.venv, "
        "then its pip install -r tests/langchain/adapters/requirements.txt)"
    )
    data_dir = tmp_path / "data"
    async with open_service(Settings(data_dir=data_dir)) as service:
        notes = await put(service, NOTES, "notes.txt", "text/plain", caller=Caller(namespace="default"))
    job = {
        "server": {
            "command": sys.executable,
            "args": [str(EXAMPLE)],
            "env": isolated_env({"BLOBSTORE_DATA_DIR": str(data_dir)}),
        },
        "artifact": notes.uri,
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [str(ADAPTERS_PYTHON), str(HERE / "adapters" / "agent_tools.py")],
        input=json.dumps(job).encode(),
        capture_output=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    seen = json.loads(done.stdout)
    assert {"analyze_image", "generate_image", "transcribe_audio", "read_artifact"} <= set(seen["tools"])
    assert seen["image_schema"]["x-blobstore-media"]["formats"] == ["png", "jpeg", "webp", "gif"]
    # The artifact, read as a LangChain Blob (resources/read) and through the read tool.
    assert seen["resource_sha256"] == [hashlib.sha256(NOTES).hexdigest()]
    assert seen["read_kinds"][0] == "text"
    # A small typed result: an image block with its bytes.
    assert seen["small_kinds"] == ["text", "image"]
    assert seen["small_image"] == {"mime_type": "image/png", "base64": True, "url": None}
    # A large one: the resource_link, which the adapters make an image block that names the artifact by URI.
    assert seen["large_kinds"] == ["text", "image"]
    assert seen["linked"]["base64"] is False
    assert seen["linked"]["url"].startswith("blobstore://artifacts/")
    # ...and that URI, passed to a typed tool, is the image it names.
    assert seen["analyzed"][0]["text"].startswith("PNG, 1600x1600 px, ")
