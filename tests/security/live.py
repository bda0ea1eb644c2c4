"""The environment of the security tests' real processes (token store and audit log under one root, the audit
log registered for the log check) and the ``blobstore`` CLI as a subprocess; servers come from
``tests.fixtures.server``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.fixtures.server import BLOBSTORE, isolated_env
from tests.security import leaks


def clean_env(root: Path, **extra: str) -> dict[str, str]:
    env = isolated_env(
        {"BLOBSTORE_DATA_DIR": str(root / "data"), "BLOBSTORE_AUDIT_LOG": str(root / "audit.jsonl"), **extra}
    )
    leaks.register_log(root / "audit.jsonl")
    return env


def run_cli(args: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BLOBSTORE, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def create_token(env: dict[str, str], namespace: str, scopes: str = "read,write") -> dict[str, Any]:
    done = run_cli(["token", "create", "--namespace", namespace, "--scopes", scopes, "--json"], env)
    assert done.returncode == 0, done.stderr
    facts: dict[str, Any] = json.loads(done.stdout)
    leaks.register_secret(facts["token"])
    return facts
