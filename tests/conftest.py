"""Shared fixtures: real PostgreSQL and S3 endpoints live in ``tests/fixtures``, and the coverage floor that
holds for the whole suite only."""

pytest_plugins = [
    "tests.fixtures.pg",
    "tests.fixtures.s3",
    "tests.fixtures.s3rver",
    "tests.fixtures.coverage_floor",
]
