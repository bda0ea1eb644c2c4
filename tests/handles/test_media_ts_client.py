"""A third-party client's validators and the typed media schemas: the TypeScript SDK client
(``tests/handles/js/typed_media.mjs``, run by node) lists the typed media example's tools, compiles every
input and output schema with the SDK's own validator (Ajv) and with Ajv in its JSON Schema 2020-12 mode
with strict checks of the schemas themselves, validates each form of a file against each typed parameter,
and calls the typed tools, checking each ``structuredContent`` against its ``outputSchema`` as the SDK client
does."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

from PIL import Image

from tests.fixtures.server import isolated_env

JS = Path(__file__).resolve().parent / "js"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "media_tool_server.py"


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 80, 20)).save(out, "PNG")
    return out.getvalue()


async def test_the_typescript_clients_validators_accept_every_typed_schema_form_and_result(
    tmp_path: Path,
) -> None:
    assert (JS / "node_modules").exists(), "npm ci --prefix tests/handles/js (.ci/run does)"
    picture = base64.b64encode(png(40, 30)).decode()
    samples: list[Any] = [
        f"data:image/png;base64,{picture}",
        picture,
        "blobstore://artifacts/a_0123456789abcdefghijklmn",
        "https://files.example.com/a.png",
        {"upload_id": "u_1"},
        {"download_url": "https://files.example.com/f", "file_id": "file_1"},
    ]
    spec = {
        "command": sys.executable,
        "args": [str(EXAMPLE)],
        "env": isolated_env({"BLOBSTORE_DATA_DIR": str(tmp_path / "data")}),
        "samples": samples,
        "calls": [
            ["generate_image", {"prompt": "orange", "width": 80, "height": 60}],
            ["analyze_image", {"image": f"data:image/png;base64,{picture}", "question": "colour?"}],
        ],
    }
    process = await asyncio.create_subprocess_exec(
        "node", str(JS / "typed_media.mjs"), json.dumps(spec), stdout=asyncio.subprocess.PIPE, cwd=JS
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0
    seen = json.loads(out)
    schemas = seen["schemas"]
    assert all(tool["input"] for tool in schemas.values())
    assert schemas["generate_image"]["output"] is True
    assert schemas["analyze_image"]["typed"] == {"image": [True] * len(samples)}
    assert schemas["transcribe_audio"]["typed"] == {"audio": [True] * len(samples)}
    made, analyzed = seen["results"]
    assert [block["type"] for block in made["content"]] == ["text", "image"]
    assert made["structuredContent"]["result"]["width"] == 80
    assert analyzed["content"][0]["text"].startswith("PNG, 40x30 px")
