"""Schemathesis against the OpenAPI schema of a live ``blobstore serve`` (token mode): no 5xx, no response
that violates the schema. The number of generated cases is printed and kept as a test property."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.security.live import clean_env, create_token, start

pytestmark = pytest.mark.e2e

MAX_EXAMPLES = 40
SEED = 20261129
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))


def test_the_live_api_survives_schemathesis(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    env = clean_env(
        tmp_path,
        BLOBSTORE_MIN_CHUNK_SIZE="16",
        BLOBSTORE_DEFAULT_CHUNK_SIZE="1024",
        BLOBSTORE_MAX_ARTIFACT_SIZE=str(1024 * 1024),
        BLOBSTORE_LOG_LEVEL="warning",
    )
    token = create_token(env, "fuzz")["token"]
    server = start(tmp_path, env)
    try:
        assert server.process.poll() is None, server.log_text()
        done = subprocess.run(
            [
                SCHEMATHESIS,
                "run",
                f"{server.url}/openapi.json",
                "--checks",
                "not_a_server_error,response_schema_conformance",
                "--max-examples",
                str(MAX_EXAMPLES),
                "--seed",
                str(SEED),
                "--generation-database",
                "none",
                "--header",
                f"Authorization: Bearer {token}",
                "--request-timeout",
                "20",
                "--workers",
                "2",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=tmp_path,
        )
    finally:
        server.stop()
    output = done.stdout + done.stderr
    generated = re.search(r"(\d+) generated", output)
    assert generated is not None, output
    cases = int(generated.group(1))
    record_property("schemathesis_cases", cases)
    print(f"schemathesis: {cases} cases")
    assert done.returncode == 0, output[-6000:]
    assert cases >= 100
    assert "Traceback" not in server.log_text()
