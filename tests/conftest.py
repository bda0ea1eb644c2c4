"""Shared fixtures: real PostgreSQL and S3 endpoints live in ``tests/fixtures``, the coverage floor that
holds for the whole suite only, and the sweep of every log the run left for secrets and content."""

pytest_plugins = [
    "tests.fixtures.pg",
    "tests.fixtures.s3",
    "tests.fixtures.s3rver",
    "tests.fixtures.coverage_floor",
    "tests.fixtures.log_sweep",
]
