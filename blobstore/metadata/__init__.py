"""Metadata: SQLAlchemy Core tables, the engines, the repository and running the migrations."""
