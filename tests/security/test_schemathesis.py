"""Schemathesis with every check against the OpenAPI document of a live ``blobstore serve`` (token mode): no
5xx, and every answer, status, media type, ``Allow`` header and refusal as the document says. The number of
generated cases is printed and kept as a test property.

Settings: ``schemathesis.toml`` beside this file (which statuses answer what no schema can say) and
``schemathesis_hooks.py`` (the tus PATCH media type).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.server import Server, start_server, stop_server
from tests.security.live import clean_env, create_token

pytestmark = pytest.mark.e2e

MAX_EXAMPLES = 60
SEED = 20261129
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MULTIPART_UPLOAD = "upload_artifact_v1_artifacts_post"


def run_schemathesis(server: Server, token: str, cwd: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [
            SCHEMATHESIS,
            "--config-file",
            str(HERE / "schemathesis.toml"),
            "run",
            f"{server.url}/openapi.json",
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
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        env={
            **os.environ,
            "SCHEMATHESIS_HOOKS": "tests.security.schemathesis_hooks",
            "PYTHONPATH": str(ROOT),
        },
    )
    return done.returncode, done.stdout + done.stderr


def cases_in(output: str) -> int:
    generated = re.search(r"(\d+) generated", output)
    assert generated is not None, output
    return int(generated.group(1))


def test_the_live_api_matches_its_openapi_document_under_every_schemathesis_check(
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
    server = start_server(tmp_path, "--server", "uvicorn", env=env)
    try:
        assert server.process.poll() is None, server.log_text()
        # Every operation, every check; the multipart upload runs apart (below).
        code, output = run_schemathesis(
            server, token, tmp_path, "--checks", "all", "--exclude-operation-id", MULTIPART_UPLOAD
        )
        # The single-request upload: multipart text parts carry no JSON types (a number generated for `name`
        # arrives as text, a valid name) and text fields must precede the file part, which no OpenAPI keyword
        # can say; so the checks that judge generated data as valid or invalid cannot judge this body.
        upload_code, upload_output = run_schemathesis(
            server,
            token,
            tmp_path,
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance,negative_data_rejection",
            "--include-operation-id",
            MULTIPART_UPLOAD,
        )
    finally:
        stop_server(server)
    cases = cases_in(output) + cases_in(upload_output)
    record_property("schemathesis_cases", cases)
    print(f"schemathesis: {cases} cases")
    assert code == 0, output[-8000:]
    assert upload_code == 0, upload_output[-8000:]
    assert cases >= 1000
    assert "Traceback" not in server.log_text()
