"""Out-of-space errors of PostgreSQL become ``storage_full`` at the metadata layer, on the real driver.

A disk-full PostgreSQL server cannot be made on a shared test server, so a PL/pgSQL trigger raises the very
errors it would (SQLSTATE ``53100 disk_full`` with "could not extend file ...: No space left on device", and
the other class-53 conditions) through asyncpg and SQLAlchemy. A real full disk under SQLite is in
``tests/e2e/test_disk_full.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy as sa

from blobstore.api import create_app
from blobstore.errors import BlobstoreError, StorageFull, StorageUnavailable
from blobstore.metadata.migrate import upgrade
from blobstore.metadata.repository import MetadataRepository
from blobstore.runtime import open_service
from tests.fixtures.asgi import app_client
from tests.fixtures.pg import opened_repository
from tests.fixtures.settings import make_settings
from tests.metadata.helpers import upload_session

pytestmark = pytest.mark.postgres

FAILING_TRIGGER = """
CREATE FUNCTION blobstore_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = TG_ARGV[0], MESSAGE = TG_ARGV[1];
END
$$
"""

EXTEND = 'could not extend file "base/16384/16399": No space left on device'


@pytest.fixture
def migrated_pg(pg_url: str) -> str:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(upgrade, pg_url).result()
    return pg_url


@pytest.fixture
async def pg_repo(migrated_pg: str) -> AsyncIterator[MetadataRepository]:
    async with opened_repository(migrated_pg) as repository:
        yield repository


async def fail_writes(repo: MetadataRepository, table: str, sqlstate: str, message: str) -> None:
    """Make every insert, update and delete on ``table`` raise ``sqlstate`` with ``message``."""
    async with repo.engine.begin() as conn:
        await conn.exec_driver_sql(FAILING_TRIGGER)
        escaped = message.replace("'", "''")
        await conn.exec_driver_sql(
            f"CREATE TRIGGER fail BEFORE INSERT OR UPDATE OR DELETE ON {table} FOR EACH ROW "
            f"EXECUTE FUNCTION blobstore_test_fail('{sqlstate}', '{escaped}')"
        )


def driver_error(exc: BaseException) -> BaseException | None:
    """The asyncpg exception at the bottom of ``exc``'s cause chain."""
    current: BaseException | None = exc
    while current is not None and not isinstance(current, asyncpg.PostgresError):
        current = current.__cause__
    return current


@pytest.mark.parametrize(
    ("sqlstate", "message"),
    [
        ("disk_full", EXTEND),
        ("53100", 'could not write to file "base/pgsql_tmp/pgsql_tmp1.0": No space left on device'),
        ("XX000", 'could not write to file "pg_wal/xlogtemp.42": No space left on device'),
    ],
)
async def test_a_full_postgresql_disk_is_storage_full_on_metadata_writes(
    pg_repo: MetadataRepository, sqlstate: str, message: str
) -> None:
    await fail_writes(pg_repo, "uploads", sqlstate, message)
    with pytest.raises(StorageFull) as caught:
        await pg_repo.create_upload(upload_session("ns"))
    assert caught.value.code == "storage_full"
    original = driver_error(caught.value)
    assert original is not None
    if sqlstate != "XX000":
        assert isinstance(original, asyncpg.exceptions.DiskFullError)
    assert "No space left on device" not in caught.value.message


@pytest.mark.parametrize("sqlstate", ["53000", "53200", "53300"])
async def test_other_resource_exhaustion_is_storage_unavailable(
    pg_repo: MetadataRepository, sqlstate: str
) -> None:
    await fail_writes(pg_repo, "uploads", sqlstate, "out of resources")
    with pytest.raises(StorageUnavailable) as caught:
        await pg_repo.create_upload(upload_session("ns"))
    original = driver_error(caught.value)
    assert isinstance(original, asyncpg.PostgresError)
    assert original.sqlstate == sqlstate


async def test_an_unrelated_database_error_is_not_mistaken_for_a_full_disk(
    pg_repo: MetadataRepository,
) -> None:
    await fail_writes(pg_repo, "uploads", "P0001", "a trigger said no")
    with pytest.raises(sa.exc.DBAPIError) as caught:
        await pg_repo.create_upload(upload_session("ns"))
    assert not isinstance(caught.value, BlobstoreError)


async def test_a_full_postgresql_disk_is_507_over_http_and_reads_still_work(
    migrated_pg: str, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, database_url=migrated_pg)
    async with open_service(settings) as service:
        app = create_app(settings, service=service)
        async with app_client(app) as http:
            stored = await http.post("/v1/artifacts", params={"name": "kept.bin"}, content=b"kept")
            assert stored.status_code == 201
            artifact_id = stored.json()["id"]
            for table in ("uploads", "artifacts"):
                async with service.repo.engine.begin() as conn:
                    if table == "uploads":
                        await conn.exec_driver_sql(FAILING_TRIGGER)
                    await conn.exec_driver_sql(
                        f"CREATE TRIGGER fail BEFORE INSERT OR UPDATE OR DELETE ON {table} FOR EACH ROW "
                        f"EXECUTE FUNCTION blobstore_test_fail('disk_full', '{EXTEND}')"
                    )
            refused = [
                await http.post("/v1/uploads", json={"name": "n.bin", "size": 10}),
                await http.patch(f"/v1/artifacts/{artifact_id}", json={"pinned": True}),
                await http.post("/v1/artifacts", params={"name": "e.bin"}, content=b""),
                await http.delete(f"/v1/artifacts/{artifact_id}"),
            ]
            for response in refused:
                assert response.status_code == 507, response.text
                assert response.headers["content-type"] == "application/problem+json"
                assert response.json()["code"] == "storage_full"
            read = await http.get(f"/v1/artifacts/{artifact_id}/content")
            assert (read.status_code, read.content) == (200, b"kept")
