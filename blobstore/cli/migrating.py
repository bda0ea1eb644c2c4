"""The child process in which ``blobstore serve`` applies pending migrations (``migrate_apart``).

Its own module, so that the child loads what migrating needs and not the server's modules.
"""

from __future__ import annotations

import os
import sys

from sqlalchemy.exc import SQLAlchemyError

from blobstore.cli.common import describe_error
from blobstore.errors import BlobstoreError
from blobstore.metadata.migrate import upgrade


def migrate_child(variable: str) -> None:
    """Migrate the database the environment variable ``variable`` names; a failure is one line on stderr and
    exit code 1."""
    try:
        upgrade(os.environ[variable])
    except (BlobstoreError, OSError, SQLAlchemyError) as exc:
        fail_with(describe_error(exc))
    except Exception as exc:  # anything else (a broken install, say) is still one line, not a traceback
        fail_with(f"{type(exc).__name__}: {exc}")


def fail_with(message: str) -> None:
    lines = message.strip().splitlines()
    sys.stderr.write((lines[0] if lines else "the migration failed") + "\n")
    sys.exit(1)
