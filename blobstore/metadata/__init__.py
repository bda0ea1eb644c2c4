"""Metadata: SQLAlchemy Core tables, the repository, migrations and the data-directory lock."""
