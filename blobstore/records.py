"""What each service-layer consumer needs of the metadata repository: one small protocol per consumer.

:class:`~blobstore.metadata.repository.MetadataRepository` satisfies every one structurally. A consumer names
only the methods it calls, so it depends on no particular layout of the repository and a test may hand it a
fake. Only the composition root (:mod:`blobstore.runtime`) picks the concrete repository.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from blobstore.models import (
    Artifact,
    BlobInfo,
    BlobRecord,
    ChunkRecord,
    CommitResult,
    CompletionClaim,
    ConsoleSessionRecord,
    NewArtifact,
    NewRendition,
    Rendition,
    TokenRecord,
    UploadSession,
    UploadState,
    UploadTail,
)

T = TypeVar("T")


class FreeingRecords(Protocol):
    """The disk reserve around work that frees space (``MetadataRepository.freeing``)."""

    async def freeing(self, work: Callable[[], Awaitable[T]]) -> T: ...


class ChunkRecords(Protocol):
    async def list_chunks(self, upload_id: str) -> list[ChunkRecord]: ...


class UploadTransitions(Protocol):
    async def transition_upload(
        self,
        upload_id: str,
        *,
        from_states: Sequence[UploadState],
        to_state: UploadState,
        artifact_id: str | None = None,
        now: datetime,
    ) -> bool: ...


class RenditionRecords(Protocol):
    """Renditions (media views) as blobs: found by key, committed over a published blob, kept alive as long
    as the longest-lived artifact they serve (:meth:`~blobstore.publishing.Publisher.publish_rendition`, the
    view cache)."""

    async def get_rendition(self, key: str, *, now: datetime) -> Rendition | None: ...

    async def commit_rendition(
        self, *, blob: BlobInfo, rendition: NewRendition, now: datetime
    ) -> Rendition: ...

    async def extend_rendition(self, key: str, expires_at: datetime | None) -> None: ...


class PublishRecords(RenditionRecords, Protocol):
    """The quota and the commit of a new artifact or rendition (:class:`~blobstore.publishing.Publisher`)."""

    async def namespace_usage(self, namespace: str, *, now: datetime) -> int: ...

    async def commit_artifact(
        self,
        *,
        blob: BlobInfo,
        artifact: NewArtifact,
        quota: int | None = None,
        completion: CompletionClaim | None = None,
        now: datetime | None = None,
        dedup_only: bool = False,
    ) -> CommitResult: ...

    @property
    def blocking_reads(self) -> bool: ...

    def live_content_blocking(self, sha256: str, size: int) -> bool: ...


class LeaseRecords(Protocol):
    """Completion leases in the upload rows (:class:`~blobstore.completion_leases.CompletionLeases`)."""

    async def begin_completion(
        self, upload_id: str, *, owner: str, lease_until: datetime, now: datetime
    ) -> bool: ...

    async def renew_completion(self, upload_id: str, *, owner: str, lease_until: datetime) -> bool: ...

    async def release_completion(
        self, upload_id: str, *, owner: str | None, now: datetime, expired_only: bool
    ) -> bool: ...


class UploadRecords(FreeingRecords, ChunkRecords, UploadTransitions, Protocol):
    """The chunked-upload state machine's rows (:class:`~blobstore.upload_sessions.UploadManager`)."""

    async def get_artifact(self, namespace: str, artifact_id: str, *, now: datetime) -> Artifact | None: ...

    async def create_upload(self, session: UploadSession, *, max_open: int | None = None) -> None: ...

    async def get_upload(self, namespace: str, upload_id: str) -> UploadSession | None: ...

    async def count_open_uploads(self, namespace: str) -> int: ...

    async def record_chunk(self, chunk: ChunkRecord) -> ChunkRecord: ...


class TailRecords(ChunkRecords, Protocol):
    """The tus tails beside the staged chunks (:class:`~blobstore.tus_uploads.TusUploads`)."""

    async def get_tail(self, upload_id: str) -> UploadTail | None: ...

    async def put_tail(
        self,
        upload_id: str,
        *,
        expected_end: int | None,
        offset: int,
        data: bytes,
        chunk_size: int,
        now: datetime,
    ) -> bool: ...

    async def delete_tail(self, upload_id: str) -> None: ...


class StorageKeyRecords(Protocol):
    async def known_storage_keys(self, keys: Sequence[str]) -> set[str]: ...


class BlobListing(StorageKeyRecords, Protocol):
    """Blob rows for the scrub (:func:`~blobstore.verify.verify_store`)."""

    async def list_blobs(self, *, after_id: int, limit: int) -> list[BlobRecord]: ...

    async def get_blob(self, blob_id: int) -> BlobRecord | None: ...


class CleanupRecords(FreeingRecords, ChunkRecords, UploadTransitions, StorageKeyRecords, Protocol):
    """Expiry and garbage collection (:class:`~blobstore.cleanup.Cleanup`)."""

    async def keep_reserve(self) -> bool: ...

    async def cleanup_due(self, *, now: datetime, older_than: datetime) -> dict[str, int]: ...

    async def expire_artifacts(self, *, now: datetime, limit: int) -> list[Artifact]: ...

    async def remove_renditions(self, *, now: datetime, limit: int) -> list[Rendition]: ...

    async def renditions_due(self, *, now: datetime) -> tuple[int, int]: ...

    async def trim_renditions(self, *, max_bytes: int, limit: int) -> list[Rendition]: ...

    async def list_completing_uploads(self, *, after_id: str, limit: int) -> list[UploadSession]: ...

    async def list_expired_uploads(self, *, now: datetime, limit: int) -> list[UploadSession]: ...

    async def list_finished_uploads(self, *, before: datetime, limit: int) -> list[UploadSession]: ...

    async def delete_upload(self, upload_id: str) -> bool: ...

    def try_advisory_lock(self, name: str) -> AbstractAsyncContextManager[bool]: ...

    async def known_staging_refs(self, refs: Sequence[str]) -> set[str]: ...

    async def mark_unreferenced_blobs(self, *, now: datetime) -> int: ...

    async def claim_unreferenced_blobs(
        self, *, older_than: datetime, now: datetime, limit: int
    ) -> list[BlobRecord]: ...

    async def list_tombstoned_blobs(self, *, limit: int) -> list[BlobRecord]: ...

    async def drop_blob(self, blob_id: int) -> bool: ...

    async def remove_ended_console_sessions(self, *, now: datetime) -> int: ...

    async def count_ended_console_sessions(self, *, now: datetime) -> int: ...


class TokenLookup(Protocol):
    """Bearer tokens as the authenticator reads them (:class:`~blobstore.auth.Authenticator`)."""

    async def count_tokens(self, *, now: datetime | None = None) -> int: ...

    async def find_token(self, secret_hash: str) -> TokenRecord | None: ...


class TokenRecords(TokenLookup, Protocol):
    """Tokens by id too: a share link names the token that minted it (:mod:`blobstore.share_links`)."""

    async def get_token(self, token_id: str) -> TokenRecord | None: ...


class ConsoleSessionRecords(Protocol):
    """Console sessions (:class:`~blobstore.console_sessions.ConsoleSessions`)."""

    async def insert_console_session(
        self,
        *,
        id_hash: str,
        token_id: str | None,
        csrf: str,
        created_at: datetime,
        idle_until: datetime,
        expires_at: datetime,
    ) -> None: ...

    async def find_console_session(self, id_hash: str) -> ConsoleSessionRecord | None: ...

    async def touch_console_session(self, id_hash: str, *, idle_until: datetime) -> None: ...

    async def set_console_flash(self, id_hash: str, flash: dict[str, Any] | None) -> None: ...

    async def delete_console_session(self, id_hash: str) -> bool: ...


class SigningKeyRecords(Protocol):
    """Keys the replicas agree on (:class:`~blobstore.link_keys.LinkKeys`)."""

    async def signing_key(self, purpose: str) -> str | None: ...

    async def ensure_signing_key(self, purpose: str, secret: str, *, now: datetime) -> str: ...

    async def replace_signing_key(self, purpose: str, secret: str, *, now: datetime) -> None: ...


class TokenStore(Protocol):
    async def insert_token(self, record: TokenRecord, secret_hash: str) -> None: ...


class HealthCheck(Protocol):
    """Anything the readiness probe asks whether it answers (the repository, the blob store)."""

    async def check(self) -> None: ...
