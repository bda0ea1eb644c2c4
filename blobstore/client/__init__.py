"""Python client for the blobstore HTTP API: async (:class:`AsyncBlobstoreClient`) and blocking
(:class:`BlobstoreClient`), with resumable parallel uploads and resumable ranged downloads."""

from blobstore.client.async_client import DEFAULT_URL, AsyncBlobstoreClient
from blobstore.client.results import (
    ArtifactInfo,
    ArtifactPage,
    DownloadResult,
    ProgressCallback,
    UploadResult,
    UploadSessionInfo,
    UploadStatusInfo,
)
from blobstore.client.retry import NO_RETRY, RetryPolicy
from blobstore.client.state import UploadStateStore, default_state_dir
from blobstore.client.sync_client import BlobstoreClient

__all__ = [
    "DEFAULT_URL",
    "NO_RETRY",
    "ArtifactInfo",
    "ArtifactPage",
    "AsyncBlobstoreClient",
    "BlobstoreClient",
    "DownloadResult",
    "ProgressCallback",
    "RetryPolicy",
    "UploadResult",
    "UploadSessionInfo",
    "UploadStateStore",
    "UploadStatusInfo",
    "default_state_dir",
]
