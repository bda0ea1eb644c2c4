"""``blobstore serve`` refuses a public address without tokens and says when it runs in local mode;
``blobstore token`` prints a secret once and stores only its hash; ``blobstore mcp`` stays in the namespace
it is given."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from blobstore.auth import hash_secret
from blobstore.config import Settings
from blobstore.models import Caller, Scope, TokenRecord
from blobstore.runtime import open_service
from tests.fixtures.commands import run_cli, run_command
from tests.fixtures.server import BLOBSTORE, start_server, stop_server
from tests.security import leaks
from tests.security.live import clean_env, create_token

pytestmark = pytest.mark.e2e


def test_serve_refuses_a_public_address_while_no_token_exists(tmp_path: Path) -> None:
    done = run_cli(["serve", "--host", "0.0.0.0", "--port", "1"], clean_env(tmp_path))
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr
    assert "--insecure-no-auth" in done.stderr


def test_serve_on_loopback_without_tokens_announces_local_mode(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--server", "uvicorn", env=clean_env(tmp_path))
    try:
        assert server.process.poll() is None, server.log_text()
        assert httpx.get(f"{server.url}/v1/artifacts").status_code == 200
    finally:
        stop_server(server)
    log = server.log_text()
    assert "local mode" in log
    assert "namespace 'default'" in log
    assert "loopback clients only" in log


def test_serve_on_a_public_address_with_a_token_requires_it(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    token = create_token(env, "public")["token"]
    server = start_server(tmp_path, "--server", "uvicorn", env=env, host="0.0.0.0")
    try:
        assert server.process.poll() is None, server.log_text()
        anonymous = httpx.get(f"{server.url}/v1/artifacts")
        authorised = httpx.get(f"{server.url}/v1/artifacts", headers={"Authorization": f"Bearer {token}"})
    finally:
        stop_server(server)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert authorised.status_code == 200
    assert "1 active token(s)" in server.log_text()


def test_insecure_no_auth_opens_a_public_address_and_says_so(tmp_path: Path) -> None:
    server = start_server(
        tmp_path, "--server", "uvicorn", "--insecure-no-auth", env=clean_env(tmp_path), host="0.0.0.0"
    )
    try:
        assert server.process.poll() is None, server.log_text()
        assert httpx.get(f"{server.url}/v1/artifacts").status_code == 200
    finally:
        stop_server(server)
    assert "for EVERY client" in server.log_text()


def test_token_cli_prints_the_secret_once_and_stores_only_its_hash(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    made = create_token(env, "ci", "read")
    assert set(made) >= {"id", "namespace", "scopes", "token", "expires_at", "state"}
    assert (made["namespace"], made["scopes"], made["state"]) == ("ci", ["read"], "active")
    secret = made["token"][len("bst_") + 17 :]
    plain = run_cli(["token", "create", "--namespace", "ci", "--expires", "1d"], env)
    assert plain.returncode == 0
    leaks.register_secret(plain.stdout.strip())
    assert plain.stdout.strip().startswith("bst_")
    assert "only time" in plain.stderr

    listed = run_cli(["token", "list", "--json"], env)
    rows = json.loads(listed.stdout)
    assert [row["id"] for row in rows] == [made["id"], plain.stdout.strip()[4:20]]
    assert all("token" not in row for row in rows)
    assert secret not in listed.stdout

    revoked = run_cli(["token", "revoke", made["id"]], env)
    assert revoked.returncode == 0
    again = run_cli(["token", "revoke", made["id"]], env)
    assert again.returncode == 1
    states = {row["id"]: row["state"] for row in json.loads(run_cli(["token", "list", "--json"], env).stdout)}
    assert states[made["id"]] == "revoked"

    stored = b"".join(path.read_bytes() for path in (tmp_path / "data").rglob("*") if path.is_file())
    assert secret.encode() not in stored
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(a["action"], a["token_id"], a["actor"]) for a in audit] == [
        ("token_create", made["id"], "cli"),
        ("token_create", rows[1]["id"], "cli"),
        ("token_revoke", made["id"], "cli"),
    ]
    assert secret not in (tmp_path / "audit.jsonl").read_text()


@pytest.mark.parametrize("token_id", ["-LJNb8MZW0eQ3YM-", "--Nb8MZW0eQ3YM-x"])
async def test_token_cli_revokes_an_older_token_whose_id_begins_with_a_dash(
    tmp_path: Path, token_id: str
) -> None:
    # New ids never begin with "-"; older ones must stay revocable exactly as `token list` shows them.
    env = clean_env(tmp_path)
    create_token(env, "ci", "read")  # creates and migrates the database the CLI works on
    older = TokenRecord(
        id=token_id,
        namespace="ci",
        scopes=frozenset({Scope.READ}),
        description=None,
        created_at=datetime.now(UTC),
        expires_at=None,
        revoked_at=None,
    )
    async with open_service(Settings(data_dir=tmp_path / "data")) as service:
        await service.repo.insert_token(older, hash_secret(secrets.token_urlsafe(32)))

    revoked = run_cli(["token", "revoke", token_id], env)
    assert revoked.returncode == 0, revoked.stderr
    states = {row["id"]: row["state"] for row in json.loads(run_cli(["token", "list", "--json"], env).stdout)}
    assert states[token_id] == "revoked"
    assert run_cli(["token", "revoke", token_id], env).returncode == 1


@pytest.mark.parametrize("option", ["--bogus", "--dat-dir=/tmp/x", "-x"])
def test_token_revoke_still_refuses_an_unknown_option(tmp_path: Path, option: str) -> None:
    # Ids that begin with "-" are taken as written; anything else that looks like an option is one.
    env = clean_env(tmp_path)
    create_token(env, "ci", "read")
    done = run_cli(["token", "revoke", option], env)
    assert done.returncode == 2
    assert f"No such option '{option.split('=')[0]}'" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespace", "../x"], "namespace"),
        (["--namespace", "ok", "--scopes", "read,root"], "scopes"),
        (["--namespace", "ok", "--expires", "yesterday"], "expiry"),
    ],
)
def test_token_cli_refuses_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    done = run_cli(["token", "create", *args], clean_env(tmp_path))
    assert done.returncode == 2
    assert message in done.stderr
    assert "bst_" not in done.stdout


async def test_stdio_mcp_runs_in_the_namespace_given_by_flag(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    async with open_service(settings) as service:
        mine = await service.create_artifact(Caller(namespace="team-one"), _stream(b"one"), name="one.txt")
        await service.create_artifact(Caller(namespace="team-two"), _stream(b"two"), name="two.txt")
    seen = {}
    for namespace in ("team-one", "team-three"):
        params = StdioServerParameters(
            command=BLOBSTORE, args=["mcp", "--data-dir", str(settings.data_dir), "--namespace", namespace]
        )
        with anyio.fail_after(60):
            async with Client(params) as client:
                seen[namespace] = [r.uri for r in (await client.list_resources()).resources]
    assert seen == {"team-one": [mine.uri], "team-three": []}


async def _stream(data: bytes) -> AsyncIterator[bytes]:
    yield data


_WITHOUT_HYPERCORN = """
import sys

sys.modules["hypercorn"] = None  # what Python sees when a package is not installed: import fails
from blobstore.cli import main

main(sys.argv[1:], prog_name="blobstore")
"""


def test_serve_offers_only_the_asgi_servers_that_are_installed(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    shown = run_command([sys.executable, "-c", _WITHOUT_HYPERCORN, "serve", "--help"], env=env)
    assert shown.returncode == 0, shown.stderr
    assert "granian" in shown.stdout
    assert "uvicorn" in shown.stdout
    assert "hypercorn" not in shown.stdout
    refused = run_command(
        [sys.executable, "-c", _WITHOUT_HYPERCORN, "serve", "--server", "hypercorn", "--port", "1"], env=env
    )
    assert refused.returncode == 2
    assert "'hypercorn' is not one of 'granian', 'uvicorn'" in refused.stderr
    # With hypercorn installed (the dev environment), it is offered.
    assert "hypercorn" in run_cli(["serve", "--help"], env).stdout
