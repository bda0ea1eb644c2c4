"""Token rows, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from blobstore.metadata.repository import MetadataRepository
from blobstore.models import Scope, TokenRecord
from tests.metadata.helpers import T0


def token(token_id: str, namespace: str = "ns", **overrides: object) -> TokenRecord:
    fields: dict[str, object] = {
        "id": token_id,
        "namespace": namespace,
        "scopes": frozenset({Scope.READ, Scope.WRITE}),
        "description": "ci",
        "created_at": T0,
        "expires_at": None,
        "revoked_at": None,
    }
    fields.update(overrides)
    return TokenRecord(**fields)  # type: ignore[arg-type]


async def test_token_is_found_by_secret_hash(repo: MetadataRepository) -> None:
    record = token("t1", scopes=frozenset({Scope.ADMIN}))
    await repo.insert_token(record, "h" * 64)

    assert await repo.find_token("h" * 64) == record
    assert await repo.find_token("x" * 64) is None


async def test_tokens_list_by_namespace_in_creation_order(repo: MetadataRepository) -> None:
    await repo.insert_token(token("t2", created_at=T0 + timedelta(seconds=1)), "2" * 64)
    await repo.insert_token(token("t1"), "1" * 64)
    await repo.insert_token(token("t3", "other"), "3" * 64)

    assert [t.id for t in await repo.list_tokens()] == ["t1", "t3", "t2"]
    assert [t.id for t in await repo.list_tokens("ns")] == ["t1", "t2"]


async def test_revoke_marks_once_and_active_count_excludes_revoked_and_expired(
    repo: MetadataRepository,
) -> None:
    await repo.insert_token(token("t1"), "1" * 64)
    await repo.insert_token(token("t2"), "2" * 64)
    await repo.insert_token(token("t3", expires_at=T0 + timedelta(days=1)), "3" * 64)
    assert await repo.count_tokens(now=T0) == 3

    assert await repo.revoke_token("t1", now=T0)
    assert not await repo.revoke_token("t1", now=T0 + timedelta(days=1))
    assert not await repo.revoke_token("missing", now=T0)

    found = await repo.find_token("1" * 64)
    assert found is not None
    assert found.revoked_at == T0
    assert await repo.count_tokens(now=T0) == 2
    assert await repo.count_tokens(now=T0 + timedelta(days=1)) == 1
