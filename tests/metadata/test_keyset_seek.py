"""A page after a cursor starts at the cursor in the index: its cost does not grow with how deep it is.

SQLite does not derive an index range from the keyset ``OR`` when the cursor comes as bound parameters, so
without the plain ``created_at <=`` bound the page after the 100,000th artifact walked 100,000 index entries
(``bench/run.py --only list``: 72 ms against 20 ms for the first page).
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from blobstore.metadata.engine import sqlite_file
from blobstore.metadata.repository import MetadataRepository
from tests.metadata.helpers import T0, blob_info, new_artifact


async def test_a_page_after_a_cursor_seeks_the_index_to_the_cursor(database_url: str) -> None:
    database = sqlite_file(database_url)
    if database is None:
        return  # PostgreSQL compares the row value as a range by itself
    repo = await MetadataRepository.open(database_url)
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "ORDER BY" in statement:
            statements.append((statement, parameters))

    try:
        created = await repo.commit_artifact(blob=blob_info(b"listed"), artifact=new_artifact())
        sa.event.listen(repo._reader.sync_engine, "before_cursor_execute", capture)
        after = (created.artifact.created_at + timedelta(seconds=1), "z")
        await repo.list_artifacts("ns", now=T0, limit=10, after=after)
    finally:
        await repo.close()

    statement, parameters = statements[-1]
    with sqlite3.connect(database) as plain:
        plan = " ".join(row[3] for row in plain.execute("EXPLAIN QUERY PLAN " + statement, parameters))
    assert "ix_artifacts_namespace_created_at_id (namespace=? AND created_at<" in plan
