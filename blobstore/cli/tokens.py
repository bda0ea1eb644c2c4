"""``blobstore token create | list | revoke``: bearer tokens, administered directly in the metadata database.

The secret is printed once, by ``create``; only its SHA-256 is stored, so a lost token is revoked and
replaced, never recovered. Every change is written to the audit log (actor ``cli``, the token's id, never
the secret).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from blobstore.auth import (
    IssuedToken,
    create_token,
    is_token_id,
    parse_expiry,
    parse_scopes,
    token_state,
    validate_namespace,
)
from blobstore.cli import main
from blobstore.cli.common import data_dir_option, echo_json, fail, run_or_fail, settings_from
from blobstore.config import Settings
from blobstore.errors import BlobstoreError
from blobstore.metadata.repository import MetadataRepository
from blobstore.models import TokenRecord
from blobstore.runtime import open_audit_log, open_repository

T = TypeVar("T")

CLI_ACTOR = "cli"


def _run(settings: Settings, action: Callable[[MetadataRepository], Awaitable[T]]) -> T:
    async def run() -> T:
        async with open_repository(settings) as repo:
            return await action(repo)

    return run_or_fail(run)


def token_facts(record: TokenRecord, now: datetime) -> dict[str, Any]:
    return {
        "id": record.id,
        "namespace": record.namespace,
        "scopes": sorted(scope.value for scope in record.scopes),
        "description": record.description,
        "created_at": record.created_at.isoformat(),
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
        "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
        "state": token_state(record, now),
    }


@main.group("token")
def token_group() -> None:
    """Create, list and revoke bearer tokens."""


@token_group.command("create")
@data_dir_option
@click.option("--namespace", required=True, help="Namespace the token acts in.")
@click.option(
    "--scopes", default="read,write", show_default=True, help="Comma-separated: read, write, admin."
)
@click.option("--expires", default=None, help="Lifetime (30d, 12h, 45m) or an ISO 8601 time; default never.")
@click.option("--description", default=None, help="A note to recognise the token by in listings.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON; the token is in the field 'token'.")
def create_command(
    data_dir: str | None,
    namespace: str,
    scopes: str,
    expires: str | None,
    description: str | None,
    as_json: bool,
) -> None:
    """Create a token. Its secret is shown now and never again."""
    settings = settings_from(data_dir=data_dir)
    now = datetime.now(UTC)
    try:
        chosen = parse_scopes(scopes)
        validate_namespace(namespace)
        expires_at = parse_expiry(expires, now) if expires else None
    except BlobstoreError as exc:
        fail(exc.message, code=2)

    async def action(repo: MetadataRepository) -> IssuedToken:
        issued = await create_token(
            repo, namespace=namespace, scopes=chosen, expires_at=expires_at, description=description, now=now
        )
        open_audit_log(settings).record(
            actor=CLI_ACTOR,
            namespace=namespace,
            action="token_create",
            result="ok",
            token_id=issued.record.id,
        )
        return issued

    issued = _run(settings, action)
    if as_json:
        echo_json({**token_facts(issued.record, now), "token": issued.token})
        return
    click.echo(issued.token)
    click.echo(
        f"token {issued.record.id} for namespace '{namespace}' "
        f"({','.join(sorted(s.value for s in chosen))}); this is the only time the secret is shown.",
        err=True,
    )


@token_group.command("list")
@data_dir_option
@click.option("--namespace", default=None, help="Only this namespace's tokens.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_command(data_dir: str | None, namespace: str | None, as_json: bool) -> None:
    """List tokens (ids, namespaces, scopes, state; never secrets)."""
    settings = settings_from(data_dir=data_dir)
    records = _run(settings, lambda repo: repo.list_tokens(namespace))
    now = datetime.now(UTC)
    facts = [token_facts(record, now) for record in records]
    if as_json:
        echo_json(facts)
        return
    if not facts:
        click.echo("no tokens (the server runs in local mode)", err=True)
        return
    for item in facts:
        click.echo(
            f"{item['id']}  {item['namespace']:<20} {','.join(item['scopes']):<16} {item['state']:<8} "
            f"expires {item['expires_at'] or 'never'}  {item['description'] or ''}".rstrip()
        )


# Ids minted before new ones stopped beginning with "-" look like options; revoke takes them as written, and
# refuses anything else that begins with "-" as the unknown option it is.
@token_group.command("revoke", context_settings={"ignore_unknown_options": True})
@data_dir_option
@click.argument("token_id")
def revoke_command(data_dir: str | None, token_id: str) -> None:
    """Revoke a token by its id; requests with it fail from now on."""
    if token_id.startswith("-") and not is_token_id(token_id):
        raise click.NoSuchOption(token_id.split("=", 1)[0])
    settings = settings_from(data_dir=data_dir)

    async def action(repo: MetadataRepository) -> TokenRecord | None:
        found = next((record for record in await repo.list_tokens() if record.id == token_id), None)
        revoked = await repo.revoke_token(token_id, now=datetime.now(UTC))
        if revoked and found is not None:
            open_audit_log(settings).record(
                actor=CLI_ACTOR,
                namespace=found.namespace,
                action="token_revoke",
                result="ok",
                token_id=token_id,
            )
        return found if revoked else None

    revoked = _run(settings, action)
    if revoked is None:
        fail("no active token has that id")
    click.echo(f"revoked token {token_id} of namespace '{revoked.namespace}'", err=True)
