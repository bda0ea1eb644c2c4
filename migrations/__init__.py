"""The Alembic environment (``env.py``, ``script.py.mako``) and revisions (``versions/``) of the metadata
database, installed as the ``blobstore.migrations`` package so that ``blobstore migrate`` finds them in a
wheel as in a checkout (``blobstore.metadata.migrate``)."""
