"""The client code of docs/mcp.md ("Client code"), run as written against a real ``blobstore serve`` and
``blobstore mcp``: the Python SDK over streamable HTTP and over stdio, the MCP Inspector's CLI over HTTP, and
LangChain's MCP adapters.

Only the placeholders change: the server's address (the docs' default port), ``/path/to/data`` and the
artifact id. The Python snippets run in this virtualenv (``blobstore`` on the PATH, as the docs assume); the
LangChain one in the adapters' virtualenv (``tests/langchain/adapters``, installed by ``.ci/run``), since its
adapters need ``mcp`` 1.x; the Inspector is the 0.15.0 of ``tests/mcp/inspector``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

import anyio
import pytest

from blobstore.config import Settings
from blobstore.models import Artifact
from blobstore.runtime import open_service
from tests.fixtures.server import BLOBSTORE, Server, isolated_env, serving
from tests.mcp.conftest import NPX_PREFIX, put

ROOT: Final = Path(__file__).resolve().parents[2]
MCP_DOC: Final = ROOT / "docs" / "mcp.md"
DOCUMENTED_URL: Final = "http://127.0.0.1:8420/mcp"
PLACEHOLDER_ID: Final = "a_…"
LANGCHAIN_DIR: Final = Path(__file__).resolve().parents[1] / "langchain" / "adapters"
LANGCHAIN_PYTHON: Final = LANGCHAIN_DIR / ".venv" / "bin" / "python"
TEXT: Final = b"first line of the notes\nsecond line\n"
TIMEOUT: Final = 300


def snippet(kind: str, containing: str) -> str:
    found = [
        block
        for block in re.findall(rf"```{kind}\n(.*?)```", MCP_DOC.read_text(encoding="utf-8"), re.DOTALL)
        if containing in block
    ]
    assert len(found) == 1, f"{len(found)} {kind} blocks of {MCP_DOC.name} contain {containing!r}"
    return str(found[0])


def with_server(code: str, server: Server) -> str:
    assert DOCUMENTED_URL in code
    return code.replace(DOCUMENTED_URL, f"{server.url}/mcp")


def run(command: list[str], *, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(command, env=isolated_env(env), capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def run_python(
    python: Path | str, code: str, tmp_path: Path, *args: str, env: Mapping[str, str] | None = None
) -> str:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    return run([str(python), str(script), *args], env=env)


async def _store(data_dir: Path, *items: tuple[bytes, str, str]) -> list[Artifact]:
    async with open_service(Settings(data_dir=data_dir)) as service:
        return [await put(service, data, name, mime) for data, name, mime in items]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Artifact]]:
    root = tmp_path_factory.mktemp("snippets")
    (notes,) = anyio.run(_store, root / "data", (TEXT, "notes.txt", "text/plain"))
    with serving(root) as server:
        yield server, notes


@pytest.fixture(scope="session")
def langchain_python() -> Path:
    """The LangChain virtualenv's Python, made from ``requirements.txt`` when it is missing (``.ci/run``
    makes it)."""
    if not LANGCHAIN_PYTHON.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", str(LANGCHAIN_DIR / ".venv")], check=True, timeout=TIMEOUT
        )
        pip = LANGCHAIN_DIR / ".venv" / "bin" / "pip"
        requirements = LANGCHAIN_DIR / "requirements.txt"
        subprocess.run([str(pip), "install", "-q", "-r", str(requirements)], check=True, timeout=TIMEOUT)
    return LANGCHAIN_PYTHON


def test_the_python_sdk_over_http_lists_and_reads_checking_is_error(
    store: tuple[Server, Artifact], tmp_path: Path
) -> None:
    server, notes = store
    code = with_server(snippet("python", "streamable_http_client"), server)
    printed = run_python(sys.executable, code, tmp_path).splitlines()
    assert printed[0] == f"{notes.uri} notes.txt {len(TEXT)}"
    assert (
        printed[1]
        == f"{notes.uri}?offset=0&length=4096: bytes 0-{len(TEXT)} of {len(TEXT)} (end of artifact)."
    )
    # The error branch: a failing read is a result with is_error, and the snippet says so.
    failing = code.replace('"offset": 0, "length": 4096', '"offset": 10**6, "length": 4096')
    script = tmp_path / "failing.py"
    script.write_text(failing, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], env=isolated_env(), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 1
    assert "read_artifact failed: range_not_satisfiable: " in done.stderr


def test_the_python_sdk_over_http_sends_the_token(tmp_path: Path) -> None:
    (notes,) = anyio.run(_store, tmp_path / "data", (TEXT, "notes.txt", "text/plain"))
    created = run(
        [BLOBSTORE, "token", "create", "--namespace", "default", "--scopes", "read", "--json"],
        env={"BLOBSTORE_DATA_DIR": str(tmp_path / "data")},
    )
    token = json.loads(created)["token"]
    with serving(tmp_path) as server:
        code = with_server(snippet("python", "streamable_http_client"), server)
        printed = run_python(sys.executable, code, tmp_path, env={"BLOBSTORE_TOKEN": token})
    assert printed.splitlines()[0] == f"{notes.uri} notes.txt {len(TEXT)}"


def test_the_python_sdk_over_stdio_saves_an_artifact_window_by_window(tmp_path: Path) -> None:
    data = os.urandom(2 * 1024 * 1024 + 12_345)
    (artifact,) = anyio.run(_store, tmp_path / "data", (data, "big.bin", "application/octet-stream"))
    code = snippet("python", "StdioServerParameters")
    assert '"/path/to/data"' in code
    code = code.replace('"/path/to/data"', json.dumps(str(tmp_path / "data")))
    # `blobstore` on the PATH, as the docs assume: the virtualenv's bin directory.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    copy = tmp_path / "copy.bin"
    run_python(sys.executable, code, tmp_path, artifact.uri, str(copy), env={"PATH": path})
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


def test_the_inspector_cli_reads_over_streamable_http(
    inspector: Path, store: tuple[Server, Artifact]
) -> None:
    server, notes = store
    (line,) = [
        line
        for line in re.findall(r"^npx .*$", MCP_DOC.read_text(encoding="utf-8"), re.MULTILINE)
        if "--transport http" in line
    ]
    command = shlex.split(with_server(line, server).replace(PLACEHOLDER_ID, notes.id))
    assert " ".join(command[:2]) == NPX_PREFIX
    answer = json.loads(run([str(inspector), *command[2:]]))
    assert answer["isError"] is False
    summary, resource = answer["content"]
    assert (
        summary["text"]
        == f"{notes.uri}?offset=0&length=4096: bytes 0-{len(TEXT)} of {len(TEXT)} (end of artifact)."
    )
    assert resource["resource"]["_meta"]["dev.blobstore/window"]["length"] == len(TEXT)


def test_the_langchain_snippet_loads_the_tools_and_reads_an_artifact(
    langchain_python: Path, store: tuple[Server, Artifact], tmp_path: Path
) -> None:
    server, notes = store
    code = with_server(snippet("python", "MultiServerMCPClient"), server)
    printed = run_python(langchain_python, code, tmp_path, notes.uri)
    assert (
        printed
        == f"text {notes.uri}: bytes 0-{len(TEXT)} of {len(TEXT)} (end of artifact).\ntext {TEXT.decode()}\n"
    )


COMMIT_THROUGH_LANGCHAIN: Final = """
import asyncio, base64, json, sys

from langchain_mcp_adapters.client import MultiServerMCPClient

DATA = b"hello from langchain\\n" * 3


async def main(url: str) -> None:
    client = MultiServerMCPClient({"blobstore": {"transport": "streamable_http", "url": url}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    begin = {"name": "notes.txt", "mime_type": "text/plain", "size": len(DATA)}
    begun = await tools["upload_begin"].ainvoke(begin)
    upload_id = json.loads(begun[0]["text"])["upload_id"]
    data = base64.b64encode(DATA).decode("ascii")
    await tools["upload_chunk"].ainvoke({"upload_id": upload_id, "index": 0, "data": data})
    committed = await tools["upload_commit"].ainvoke({"upload_id": upload_id})
    print(json.dumps([{key: value for key, value in block.items() if key != "id"} for block in committed]))


asyncio.run(main(sys.argv[1]))
"""


def test_what_a_langchain_model_gets_of_a_link_is_the_documented_line_and_a_bare_file_block(
    langchain_python: Path, store: tuple[Server, Artifact], tmp_path: Path
) -> None:
    server, _notes = store
    line, file = json.loads(
        run_python(langchain_python, COMMIT_THROUGH_LANGCHAIN, tmp_path, f"{server.url}/mcp")
    )
    uri = file["url"]
    assert file == {"type": "file", "url": uri, "mime_type": "text/plain"}
    documented = snippet("text", "Stored notes.txt").strip()
    assert line == {
        "type": "text",
        "text": documented.replace(f"blobstore://artifacts/{PLACEHOLDER_ID}", uri),
    }
