"""Prometheus metrics of one server process, exposed at ``GET /metrics`` when ``BLOBSTORE_METRICS=true``.

The counters live in one registry per process (:data:`REGISTRY`), not in the ``prometheus_client`` default
one, so embedding applications keep their own. Each replica (and each ``blobstore serve`` process) counts
what it served itself: scrape every replica and sum counters across them. ``blobstore_uploads_open`` is the
exception: it is read from the shared metadata database at scrape time, so every replica reports the same
cluster-wide figure (aggregate it with ``max``, not ``sum``).

Label values are bounded: routes are templates (``/v1/artifacts/{artifact_id}``), never raw paths.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

REGISTRY: Final = CollectorRegistry(auto_describe=True)

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

HTTP_REQUESTS: Final = Counter(
    "blobstore_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ("method", "route", "status"),
    registry=REGISTRY,
)
HTTP_DURATION: Final = Histogram(
    "blobstore_http_request_duration_seconds",
    "Time from the request's arrival until its response was sent, by method and route template.",
    ("method", "route"),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
BYTES_IN: Final = Counter(
    "blobstore_http_request_body_bytes",
    "Request body bytes received.",
    registry=REGISTRY,
)
BYTES_OUT: Final = Counter(
    "blobstore_http_response_body_bytes",
    "Response body bytes sent (files sent by the server itself count by their Content-Length).",
    registry=REGISTRY,
)
UPLOADS_OPEN: Final = Gauge(
    "blobstore_uploads_open",
    "Chunked uploads open in the metadata database (every namespace, every replica), read at scrape time.",
    registry=REGISTRY,
)
COMPLETIONS: Final = Counter(
    "blobstore_artifacts_published",
    "Artifacts published (direct, chunked, tus and MCP uploads), by whether the content was already stored.",
    ("deduplicated",),
    registry=REGISTRY,
)
CLEANUP_RUNS: Final = Counter(
    "blobstore_cleanup_runs",
    "Cleanup runs finished in this process (periodic or 'blobstore cleanup'), dry runs excluded.",
    registry=REGISTRY,
)
CLEANUP_FREED_BYTES: Final = Counter(
    "blobstore_cleanup_freed_bytes",
    "Bytes freed by cleanup runs, by step.",
    ("step",),
    registry=REGISTRY,
)
STORAGE_ERRORS: Final = Counter(
    "blobstore_storage_errors",
    "Requests that failed with storage_unavailable or storage_full, by the storage operation that failed.",
    ("operation", "code"),
    registry=REGISTRY,
)
INTEGRITY_FAILURES: Final = Counter(
    "blobstore_integrity_failures",
    "Content that failed a check: corruption (stored bytes), digest_mismatch and checksum_mismatch "
    "(sent bytes).",
    ("code",),
    registry=REGISTRY,
)
MCP_REQUESTS: Final = Counter(
    "blobstore_mcp_requests",
    "MCP requests handled, by JSON-RPC method and outcome (ok or error).",
    ("method", "outcome"),
    registry=REGISTRY,
)

INTEGRITY_CODES: Final = frozenset({"corruption", "digest_mismatch", "checksum_mismatch"})
STORAGE_CODES: Final = frozenset({"storage_unavailable", "storage_full"})


def count_error(code: str, operation: str | None = None) -> None:
    """Count an error that reached a protocol edge (HTTP or MCP) under the metric its code belongs to."""
    if code in INTEGRITY_CODES:
        INTEGRITY_FAILURES.labels(code).inc()
    elif code in STORAGE_CODES:
        STORAGE_ERRORS.labels(operation or "unknown", code).inc()


def exposition() -> bytes:
    """The registry in the Prometheus text format."""
    return generate_latest(REGISTRY)
