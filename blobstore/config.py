"""Settings, read from ``BLOBSTORE_*`` environment variables and CLI flags.

Nothing here runs at import time: the composition root (``blobstore.asgi`` / ``blobstore.cli``) builds one
:class:`Settings` and passes it down. Invalid values fail at start with one line naming the setting
(:func:`load_settings`).
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

ACCEL_PREFIX = re.compile(r"/(?:(?!\.\.?/)[A-Za-z0-9._~-]+/)+")
"""A URI path of one or more plain segments (no ``.`` or ``..``), starting and ending with ``/``."""
OCR_LANGUAGES = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}(?:\+[A-Za-z][A-Za-z0-9_]{0,31}){0,7}")
TRANSCRIBE_LANGUAGE = re.compile(r"[a-z]{2,3}(?:-[a-z]{2,4})?")
"""Tesseract language packs joined by ``+``: names only, never a path or an option."""


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcp-blobstore"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BLOBSTORE_", extra="forbid", validate_default=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str | None = None
    """``sqlite+aiosqlite:///path`` or ``postgresql+asyncpg://…``; default: SQLite inside ``data_dir``."""
    storage_url: str | None = None
    """``file:///path``, ``s3://bucket/prefix`` or ``memory://``; default: ``data_dir/blobs``."""
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_presign_downloads: bool = False
    """Answer whole and single-range downloads with a ``307`` redirect to a presigned S3 GET URL (S3 only)."""
    s3_presign_uploads: bool = False
    """Offer presigned ``UploadPart`` URLs to chunked uploads that ask for a direct transfer (S3 only)."""
    s3_presign_seconds: int = Field(default=300, ge=1, le=3600)
    """Lifetime of a presigned URL: anyone holding it may use it until then, so keep it short."""

    host: str = "127.0.0.1"
    port: int = Field(default=8420, ge=0, le=65535)
    public_url: str | None = None
    """Base URL clients reach the server at (for links in responses); default ``http://host:port``. Its origin
    is the server's own (the request guard, ``blobstore.api.request_guard``) and its host is one of the names
    the server answers to."""
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Host names (the ``Host`` header, any port) the server answers to besides loopback names, the bind
    address and the public URL's host; comma-separated in ``BLOBSTORE_ALLOWED_HOSTS``. ``.example.com`` also
    matches every subdomain; ``*`` turns the check off, which opens a server without tokens to DNS rebinding
    (``blobstore.web_origins``)."""
    forwarded_allow_ips: Annotated[tuple[str, ...], NoDecode] = ("127.0.0.0/8", "::1")
    """Peers (addresses or networks) whose ``X-Forwarded-Proto``, ``X-Forwarded-Host`` and ``X-Forwarded-For``
    are believed; comma-separated in ``BLOBSTORE_FORWARDED_ALLOW_IPS``; ``*`` trusts every peer. Default:
    loopback, where a reverse proxy on the same machine connects from."""
    insecure_no_auth: bool = False
    mcp_namespace: str = "default"
    auth_cache_seconds: float = Field(default=2.0, ge=0)
    """How long the answer to "is any token active?" (local mode or not) is reused."""
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    """On stop (SIGTERM), how long the requests in flight get to end before they are cancelled and the store
    closes (``blobstore.api.in_flight``)."""
    body_timeout_seconds: float = Field(default=60.0, gt=0)
    """A request body that delivers nothing for this long is abandoned (``request_timeout``)."""
    min_body_rate: int = Field(default=500, ge=0)
    """Bytes per second a request body must average over ``min_body_rate_window_seconds`` (like Apache
    ``mod_reqtimeout`` ``MinRate``), or it is cut with ``request_timeout``; 0 turns the check off. Only time
    spent waiting for the client counts: a server that is slow to read never makes a client too slow."""
    min_body_rate_window_seconds: float = Field(default=30.0, gt=0)
    """The span the minimum body rate is averaged over; a body is measured from its first full window on."""

    # Sizes and limits.
    max_artifact_size: int = Field(default=5 * GiB, gt=0)
    default_chunk_size: int = Field(default=8 * MiB, gt=0)
    min_chunk_size: int = Field(default=256 * KiB, gt=0)
    max_chunk_size: int = Field(default=64 * MiB, gt=0)
    max_chunks_per_upload: int = Field(default=10_000, gt=0)
    max_open_uploads: int = Field(default=100, gt=0)
    namespace_quota_bytes: int | None = Field(default=None, gt=0)
    max_ranges: int = Field(default=16, gt=0)
    max_json_body: int = Field(default=1 * MiB, gt=0)
    storage_chunk_size: int = Field(default=1 * MiB, gt=0)
    tus_chunk_size: int = Field(default=1 * MiB, gt=0)
    """Staged chunk size of tus uploads, whose PATCHes arrive at any offset and length
    (``blobstore.tus_uploads``); clamped into ``[min_chunk_size, max_chunk_size]``."""
    io_threads: int = Field(default=16, gt=0)
    verified_block_seconds: float = Field(default=60.0, ge=0)
    """On local disk, how long a block that a read checked against its XXH3 is trusted: a read within that
    time reads only the bytes it answers (``blobstore.storage.verified_blocks``); 0 checks every block of
    every read."""
    facts_cache_seconds: float = Field(default=1.0, ge=0)
    """How long a content read trusts the artifact it just looked up (``blobstore.artifact_facts``): a delete,
    an unpin or a shorter expiry made by another process on the same database reaches this one's reads within
    this bound; this process's own changes at once. 0 looks every read up."""
    inline_reads: bool = True
    """Over SQLite and local disk (or memory), whether a small read whose bytes are in the page cache is done
    on the event loop instead of a worker thread (``blobstore.nowait``)."""
    accel_redirect: str | None = None
    """On local disk behind nginx: the URI prefix of an ``internal`` nginx location aliased to the storage
    directory (e.g. ``/_blobstore/``). A whole-content ``GET`` that reaches the server with the request header
    ``X-Sendfile-Type: X-Accel-Redirect`` (set by that nginx) is answered with ``X-Accel-Redirect: <prefix>
    <key>`` and no body, and nginx sends the file itself (``deploy/nginx-single.conf``)."""

    # Time.
    default_ttl_seconds: int = Field(default=7 * 24 * 3600, gt=0)
    max_ttl_seconds: int = Field(default=90 * 24 * 3600, gt=0)
    upload_ttl_seconds: int = Field(default=24 * 3600, gt=0)
    gc_grace_seconds: int = Field(default=3600, ge=0)
    cleanup_interval_seconds: int | None = Field(default=None, gt=0)
    completion_lease_seconds: float = Field(default=20.0, gt=0)
    """A running completion renews its lease every quarter of this; one whose lease ran out is abandoned."""

    # MCP.
    inline_limit: int = Field(default=512 * KiB, gt=0)
    mcp_window_max: int = Field(default=1 * MiB, gt=0)
    mcp_chunk_max: int = Field(default=2 * MiB, gt=0)
    image_long_edge: int = Field(default=1024, gt=0)
    proxy_max_argument_bytes: int = Field(default=20 * MiB, gt=0)
    """The most bytes the artifact URIs of one tool call may bring into its arguments (``blobstore proxy`` and
    embedded tools, ``mcp_resources.tools.handles``); a larger handle is refused naming this setting. It also
    caps a file an embedded tool's file parameter fetches from a ``download_url``."""
    file_download_origins: Annotated[tuple[str, ...], NoDecode] = ()
    """Origins (``scheme://host[:port]``) whose ``download_url`` an embedded tool's file parameter may fetch
    (``{download_url, file_id}``, ChatGPT's ``openai/fileParams``); comma-separated in
    ``BLOBSTORE_FILE_DOWNLOAD_ORIGINS``. Empty: such objects are refused. The same origins bound the
    ``https://`` URLs (and ``http://`` ones, where such an origin is listed) a file parameter takes as a
    string, and every redirect of either."""
    file_download_networks: Annotated[tuple[str, ...], NoDecode] = ()
    """Networks (CIDR, comma-separated) a file download may reach although they are not public: loopback,
    private, link-local and cloud metadata addresses are refused otherwise, whatever the origin's name
    resolves to."""
    file_download_max_redirects: int = Field(default=3, ge=0, le=10)
    """Redirects a file download follows, each hop's origin and address checked again."""
    file_download_timeout_seconds: float = Field(default=30.0, gt=0)
    """The longest a file download may take, from resolving its name to its last byte."""

    # Typed media arguments of embedded tools (docs/mcp.md, "Typed media").
    media_max_bytes: int = Field(default=100 * MiB, gt=0)
    """The most bytes a typed media argument (``Image``, ``Audio``, ``Video``, ``Document``) may have unless
    its annotation says otherwise (``MediaLimits(max_bytes=...)``)."""
    media_max_pixels: int | None = Field(default=None, gt=0)
    """The most pixels a typed image or video argument may have unless its annotation says otherwise."""
    media_max_seconds: float | None = Field(default=None, gt=0)
    """The longest a typed audio or video argument may be unless its annotation says otherwise."""

    # Media views (docs/views.md).
    view_max_pages: int = Field(default=10, ge=1, le=100)
    """Pages one ``read_artifact(pages=...)`` call may ask for."""
    view_max_audio_seconds: float = Field(default=30.0, gt=0, le=600)
    """Longest audio segment one view returns."""
    view_max_transcript_seconds: float = Field(default=600.0, gt=0, le=86_400)
    """The longest stretch of a recording one transcript call covers (its ``Next:`` line names the rest)."""
    transcribe_engine: Literal["pocketsphinx", "whisper"] = "pocketsphinx"
    """The speech engine of transcripts: PocketSphinx (its US English model ships with it), or faster-whisper
    (the ``whisper`` extra) over the CTranslate2 model directory ``transcribe_model`` names."""
    transcribe_model: Path | None = None
    """A local CTranslate2 Whisper model directory (``model.bin``, ``config.json``, ``tokenizer.json``): the
    server never downloads one. Required for the ``whisper`` engine, unused by PocketSphinx."""
    transcribe_language: str | None = None
    """The language spoken: PocketSphinx has ``en-us`` only (the default); Whisper takes a code such as
    ``en`` or ``de``, and without one detects the language of each piece."""
    view_timeout_seconds: float = Field(default=30.0, gt=0)
    """A decoder worker still running after this is killed (``view_timeout``)."""
    view_workers: int = Field(default=2, ge=1, le=64)
    """Decoder worker processes running at once; further views wait for one."""
    view_memory_bytes: int = Field(default=2 * 1024 * MiB, ge=256 * MiB)
    """Address-space limit of one decoder worker; a decoder that needs more fails with ``view_too_large``."""
    view_cache_max_bytes: int | None = Field(default=None, gt=0)
    """A rough bound on the cached views: when their sizes add up to more, cleanup's ``expire`` step deletes
    the oldest until they fit (a blob two views share counts twice). None: views live as long as their
    sources."""

    ocr_languages: str = "eng"
    """The Tesseract language packs OCR reads with, joined by ``+`` (``eng+chi_sim``): each is Debian's
    ``tesseract-ocr-<lang>`` package. A pack that is not installed makes OCR ``unsupported_media``, saying
    so."""
    ocr_min_confidence: float = Field(default=0.9, ge=0, le=1)
    """A word OCR read with a lower confidence (0-1) is marked ``[?word]`` in the text, and counted."""

    mcp_files_capability: Literal["off", "experimental"] = "off"
    """``experimental``: the MCP server advertises SEP-2631's ``files`` capability (under ``experimental``)
    and answers ``files/authorizeUpload`` and ``files/authorizeDownload``
    (``mcp_resources.tools.files_capability``)."""

    proxy_max_message_bytes: int = Field(default=1 * GiB, gt=0)
    """The longest message ``blobstore proxy`` reads from its upstream; a longer one is refused (its call gets
    an error naming this cap) while the messages after it still flow."""

    log_level: str = "info"
    audit_log: Path | None = None
    """File for audit JSON lines (made 0600); ``-``: standard output; default ``data_dir/audit.jsonl``."""
    disk_reserve_bytes: int = Field(default=16 * MiB, ge=0)
    """Space a server keeps allocated beside its SQLite database (``disk.reserve``) and releases when a full
    disk would stop a delete or a cleanup step; 0 keeps none."""

    # Browsers.
    cors_origins: Annotated[tuple[str, ...], NoDecode] = ()
    """Origins (``scheme://host[:port]``) whose pages may call the HTTP API and ``/mcp`` across origins;
    comma-separated in ``BLOBSTORE_CORS_ORIGINS``. Empty: no CORS (``blobstore.api.cors``)."""

    # The web console.
    console: bool | None = None
    """Serve the web console at ``/console`` (``blobstore.api.console``); default: on when the server binds
    loopback only (where local mode applies), off otherwise until enabled."""
    link_key: str | None = Field(default=None, min_length=32, repr=False)
    """Key of the signed share links and upload targets (HMAC-SHA256; ``blobstore.signed_links``); default: a
    random key made once and kept in the metadata database, which every replica of it shares
    (``blobstore.link_keys``). Changing it revokes every link signed with the old one."""
    console_session_idle_seconds: int = Field(default=30 * 60, ge=60)
    """A console session not used for this long ends (``blobstore.console_sessions``)."""
    console_session_seconds: int = Field(default=12 * 3600, ge=60)
    """A console session ends this long after its login however it is used (or when its token expires)."""

    # Observability.
    metrics: bool = False
    """Serve ``GET /metrics`` (Prometheus text format); it needs the ``admin`` scope once tokens exist."""
    access_log_level: str = "info"
    """Level of the one JSON access line per request (logger ``blobstore.access``), or ``off``."""

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        scheme = urlsplit(value).scheme
        if scheme not in {"sqlite+aiosqlite", "postgresql+asyncpg"}:
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value

    @field_validator("storage_url")
    @classmethod
    def _check_storage_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme == "file" and parts.path.startswith("/"):
            return value
        if parts.scheme == "s3" and parts.netloc:
            return value
        if parts.scheme == "memory":
            return value
        raise ValueError("must be file:///absolute/path, s3://bucket[/prefix] or memory://")

    @field_validator("accel_redirect")
    @classmethod
    def _check_accel_redirect(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # The prefix goes into a response header as it is, and nginx matches it against a location.
        if ACCEL_PREFIX.fullmatch(value) is None:
            raise ValueError("must be a path that starts and ends with '/', e.g. /_blobstore/")
        return value

    @field_validator("transcribe_model")
    @classmethod
    def _check_transcribe_model(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("ocr_languages")
    @classmethod
    def _check_ocr_languages(cls, value: str) -> str:
        if OCR_LANGUAGES.fullmatch(value) is None:
            raise ValueError("must be Tesseract language pack names joined by '+', e.g. eng or eng+chi_sim")
        return value

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        if value.lower() not in {"debug", "info", "warning", "error"}:
            raise ValueError("must be debug, info, warning or error")
        return value.lower()

    @field_validator("cors_origins", "file_download_origins", mode="before")
    @classmethod
    def _check_cors_origins(cls, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value or ())
        origins: list[str] = []
        for item in items:
            text = str(item).strip()
            if text:
                origin = normalize_origin(text)
                if origin not in origins:
                    origins.append(origin)
        return tuple(origins)

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
            raise ValueError("must be http(s)://host[:port][/path]")
        try:
            parts.port  # noqa: B018 - a port past 65535 raises here
        except ValueError:
            raise ValueError("must be http(s)://host[:port][/path]") from None
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _check_allowed_hosts(cls, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value or ())
        hosts: list[str] = []
        for item in items:
            text = str(item).strip().lower()
            if not text:
                continue
            if text != "*" and not _HOST_NAME.fullmatch(text.removeprefix(".").strip("[]")):
                raise ValueError(f"each entry must be a host name, an address, .domain or *, got {text!r}")
            if text not in hosts:
                hosts.append(text)
        return tuple(hosts)

    @field_validator("forwarded_allow_ips", mode="before")
    @classmethod
    def _check_forwarded_allow_ips(cls, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value or ())
        peers: list[str] = []
        for item in items:
            text = str(item).strip()
            if not text:
                continue
            if text != "*":
                try:
                    text = str(ipaddress.ip_network(text, strict=False))
                except ValueError:
                    raise ValueError(f"each entry must be an address, a network or *, got {text!r}") from None
            if text not in peers:
                peers.append(text)
        return tuple(peers)

    @field_validator("file_download_networks", mode="before")
    @classmethod
    def _check_networks(cls, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value or ())
        networks: list[str] = []
        for item in items:
            text = str(item).strip()
            if text:
                network = str(ipaddress.ip_network(text, strict=False))
                if network not in networks:
                    networks.append(network)
        return tuple(networks)

    @field_validator("access_log_level")
    @classmethod
    def _check_access_log_level(cls, value: str) -> str:
        if value.lower() not in {"debug", "info", "warning", "off"}:
            raise ValueError("must be debug, info, warning or off")
        return value.lower()

    @model_validator(mode="after")
    def _check_consistency(self) -> Settings:
        if not self.min_chunk_size <= self.default_chunk_size <= self.max_chunk_size:
            raise ValueError(
                "chunk sizes must satisfy min_chunk_size <= default_chunk_size <= max_chunk_size"
            )
        if self.default_ttl_seconds > self.max_ttl_seconds:
            raise ValueError("default_ttl_seconds must not exceed max_ttl_seconds")
        if self.console_session_idle_seconds > self.console_session_seconds:
            raise ValueError("console_session_idle_seconds must not exceed console_session_seconds")
        if self.transcribe_engine == "whisper" and self.transcribe_model is None:
            raise ValueError(
                "transcribe_engine whisper needs transcribe_model, a local CTranslate2 Whisper model"
                " directory (the server never downloads one)"
            )
        language = self.transcribe_language
        if self.transcribe_engine == "pocketsphinx" and language not in (None, "en-us"):
            raise ValueError(f"PocketSphinx transcribes en-us only, not {language!r}")
        if language is not None and TRANSCRIBE_LANGUAGE.fullmatch(language) is None:
            raise ValueError(
                f"transcribe_language must be a language code such as en or en-us, not {language!r}"
            )
        return self

    @property
    def ignored_settings(self) -> dict[str, str]:
        """Settings that are on but do nothing with this storage, and why (``serve`` says so at start)."""
        scheme = urlsplit(self.resolved_storage_url).scheme
        presign = "presigned URLs need S3 storage (s3://…)"
        reasons = {
            "BLOBSTORE_S3_PRESIGN_DOWNLOADS": (self.s3_presign_downloads and scheme != "s3", presign),
            "BLOBSTORE_S3_PRESIGN_UPLOADS": (self.s3_presign_uploads and scheme != "s3", presign),
            "BLOBSTORE_ACCEL_REDIRECT": (
                self.accel_redirect is not None and scheme != "file",
                "nginx can only send the files of local storage (file://…)",
            ),
        }
        return {name: why for name, (ignored, why) in reasons.items() if ignored}

    @property
    def console_enabled(self) -> bool:
        return self.binds_loopback_only if self.console is None else self.console

    @property
    def resolved_audit_log(self) -> Path:
        """Where audit lines go: ``audit_log``, else ``audit.jsonl`` in the data directory (``-``: stdout)."""
        return self.audit_log or self.data_dir / "audit.jsonl"

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'metadata.sqlite3'}"

    @property
    def resolved_storage_url(self) -> str:
        return self.storage_url or (self.data_dir / "blobs").as_uri()

    @property
    def is_embedded(self) -> bool:
        """SQLite metadata: one server process per data directory."""
        return self.resolved_database_url.startswith("sqlite")

    @property
    def binds_loopback_only(self) -> bool:
        host = self.host.strip("[]")
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._:-]*[a-z0-9])?")
"""A DNS name or an IPv4/IPv6 address as it appears in ``Host`` (IPv6 without its brackets), lower-case."""


def normalize_origin(text: str) -> str:
    """An origin as a browser serializes it in ``Origin`` (RFC 6454 §6.2): lower-case scheme and host, no
    default port, no path. A trailing ``/`` is forgiven; anything else (``*``, ``null``, a path) is refused,
    since every allowed origin must be named.
    """
    message = f"each origin must be http(s)://host[:port] with nothing after it, got {text!r}"
    parts = urlsplit(text)
    if (
        parts.scheme.lower() not in _DEFAULT_PORTS
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
        or "*" in text
    ):
        raise ValueError(message)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(message) from None
    scheme = parts.scheme.lower()
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    shown_port = f":{port}" if port is not None and port != _DEFAULT_PORTS[scheme] else ""
    return f"{scheme}://{host}{shown_port}"


class SettingsError(Exception):
    """Invalid settings; the message is one line that names the setting."""


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment plus explicit overrides (CLI flags); ``None`` ones are ignored."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "settings"
        name = f"BLOBSTORE_{field.upper()}" if field != "settings" else "settings"
        raise SettingsError(f"invalid setting {name}: {first['msg']}") from None
