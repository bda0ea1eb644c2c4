"""Shared fixtures: real PostgreSQL and S3 endpoints live in ``tests/fixtures``."""

pytest_plugins = ["tests.fixtures.pg", "tests.fixtures.s3", "tests.fixtures.s3rver"]
