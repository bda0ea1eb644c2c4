"""The environment of the security tests' real processes (token store and audit log under one root, the audit
log registered for the log check) and tokens made with the ``blobstore`` CLI; servers come from
``tests.fixtures.server``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.commands import run_cli
from tests.fixtures.server import isolated_env
from tests.security import leaks


def clean_env(root: Path, **extra: str) -> dict[str, str]:
    env = isolated_env(
        {"BLOBSTORE_DATA_DIR": str(root / "data"), "BLOBSTORE_AUDIT_LOG": str(root / "audit.jsonl"), **extra}
    )
    leaks.register_log(root / "audit.jsonl")
    return env


def create_token(env: dict[str, str], namespace: str, scopes: str = "read,write") -> dict[str, Any]:
    done = run_cli(["token", "create", "--namespace", namespace, "--scopes", scopes, "--json"], env)
    assert done.returncode == 0, done.stderr
    facts: dict[str, Any] = json.loads(done.stdout)
    leaks.register_secret(facts["token"])
    return facts
