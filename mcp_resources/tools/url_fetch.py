"""Files a tool argument names by URL, fetched with a guard against server-side request forgery.

A file parameter takes an ``https://`` string, or a host's ``{"download_url": …}`` object (ChatGPT's
``openai/fileParams``), and the embedding server fetches it for the tool. The server stands inside a network
the caller does not, so the fetch is bounded the way a request forged by the caller must be:

* only origins the operator lists (``BLOBSTORE_FILE_DOWNLOAD_ORIGINS``) are fetched; an ``http://`` URL only
  when its ``http://`` origin is listed;
* the name is resolved here, and every address it resolves to must be a public one: loopback, private,
  link-local (cloud metadata services live there: 169.254.169.254, ``fd00:ec2::254``), shared, multicast and
  reserved addresses are refused unless a network the operator lists (``BLOBSTORE_FILE_DOWNLOAD_NETWORKS``)
  holds them. The connection then goes to the address that was checked (the TLS name and ``Host`` stay the
  URL's), so a name that resolves differently a moment later (DNS rebinding) reaches nothing new;
* a redirect is followed only a few times (``BLOBSTORE_FILE_DOWNLOAD_MAX_REDIRECTS``), and each hop's origin
  and addresses are checked again;
* the size cap holds while the body streams (a ``Content-Length`` over it is refused before the body);
* one timeout bounds all of it (``BLOBSTORE_FILE_DOWNLOAD_TIMEOUT_SECONDS``).

Refusals name the origin and the kind of address, never the URL (it may carry a signature) nor the address.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import tempfile
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

from blobstore.config import Settings, normalize_origin
from blobstore.errors import BlobstoreError, InvalidRequest, LimitExceeded

ORIGINS_SETTING: Final = "BLOBSTORE_FILE_DOWNLOAD_ORIGINS"
NETWORKS_SETTING: Final = "BLOBSTORE_FILE_DOWNLOAD_NETWORKS"
REDIRECTS_SETTING: Final = "BLOBSTORE_FILE_DOWNLOAD_MAX_REDIRECTS"
TIMEOUT_SETTING: Final = "BLOBSTORE_FILE_DOWNLOAD_TIMEOUT_SECONDS"
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
_PIECE: Final = 256 * 1024

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: Final = frozenset(
    ipaddress.ip_address(text)
    for text in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "168.63.129.16")
)
"""Cloud instance-metadata endpoints (AWS, ECS tasks, Alibaba, AWS over IPv6, Azure's wire server)."""


def address_class(address: IpAddress) -> str | None:
    """Why ``address`` may not be fetched from (``"loopback"``, ``"private"``, …); None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address_class(address.ipv4_mapped)
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    for kind, flag in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return kind
    # What is left and still not global: shared address space (100.64.0.0/10) and the like.
    return None if address.is_global else "non-public"


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """Where and how much a file download may fetch (from settings: :meth:`from_settings`)."""

    origins: frozenset[str]
    networks: tuple[IpNetwork, ...]
    max_redirects: int
    timeout: float
    max_bytes: int
    cap_setting: str
    """The setting that sets ``max_bytes`` (named when a file is over it)."""

    @classmethod
    def from_settings(cls, settings: Settings, max_bytes: int, cap_setting: str) -> FetchPolicy:
        return cls(
            origins=frozenset(settings.file_download_origins),
            networks=tuple(ipaddress.ip_network(net) for net in settings.file_download_networks),
            max_redirects=settings.file_download_max_redirects,
            timeout=settings.file_download_timeout_seconds,
            max_bytes=max_bytes,
            cap_setting=cap_setting,
        )

    def allowed(self, address: IpAddress) -> bool:
        return any(address in network for network in self.networks)


@dataclass(frozen=True, slots=True)
class Fetched:
    path: Path
    size: int
    content_type: str | None


def origin_of(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        return normalize_origin(f"{parts.scheme}://{parts.netloc}")
    except ValueError:
        return None


async def _addresses(host: str, port: int) -> list[IpAddress]:
    try:
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    out: list[IpAddress] = []
    for _family, _type, _proto, _name, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in out:
            out.append(address)
    return out


_FETCHING: ContextVar[bool] = ContextVar("blobstore_url_fetch", default=False)


class _QuietFetches(logging.Filter):
    """Drops httpx's request lines while a download runs: they hold the URL, and a URL may carry a
    signature that logs must not keep."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _FETCHING.get()


_QUIET: Final = _QuietFetches()


class UrlFetcher:
    """Fetches one URL into a 0600 temporary file under a :class:`FetchPolicy`."""

    def __init__(self, policy: FetchPolicy) -> None:
        self.policy = policy
        logger = logging.getLogger("httpx")
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)

    def check_origin(self, url: str, argument: str) -> str:
        origin = origin_of(url)
        if origin is None or origin not in self.policy.origins:
            # The URL itself may carry a signature: only its origin is named.
            raise InvalidRequest(
                f"{argument}: the URL's origin {origin or '(none)'} is not one {ORIGINS_SETTING} allows",
                argument=argument,
                origin=origin,
            )
        return origin

    async def _pinned_address(self, url: str, origin: str, argument: str) -> IpAddress:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = await _addresses(host, port)
        if not addresses:
            raise InvalidRequest(
                f"{argument}: the name of {origin} could not be resolved", argument=argument, origin=origin
            )
        for address in addresses:
            kind = address_class(address)
            if kind is not None and not self.policy.allowed(address):
                raise InvalidRequest(
                    f"{argument}: {origin} resolves to a {kind} address, which file downloads may not "
                    f"reach unless {NETWORKS_SETTING} lists its network",
                    argument=argument,
                    origin=origin,
                    address_class=kind,
                )
        return addresses[0]

    async def fetch(self, url: str, argument: str, cap: int | None = None) -> Fetched:
        """The body of ``url`` (after at most the allowed redirects) in a 0600 temporary file, which the
        caller removes; the catalogue's errors for every refusal, before or while the body streams. ``cap``
        replaces the policy's size cap for this file (a typed media argument's ``max_bytes``)."""
        fd, name = tempfile.mkstemp(prefix="blobstore-download-")
        os.close(fd)
        spool = Path(name)
        fetched: Fetched | None = None
        quiet = _FETCHING.set(True)
        try:
            with anyio.fail_after(self.policy.timeout):
                fetched = await self._fetch(url, argument, spool, cap)
        except TimeoutError:
            raise InvalidRequest(
                f"{argument}: the download took longer than {self.policy.timeout:g} s ({TIMEOUT_SETTING})",
                argument=argument,
                timeout_seconds=self.policy.timeout,
            ) from None
        except httpx.HTTPError:
            raise InvalidRequest(f"{argument}: the URL could not be fetched", argument=argument) from None
        finally:
            _FETCHING.reset(quiet)
            # On every way out but success (a cancelled call too); after that the caller removes it.
            if fetched is None:
                with anyio.CancelScope(shield=True):
                    await anyio.Path(spool).unlink(missing_ok=True)
        return fetched

    async def _fetch(self, url: str, argument: str, spool: Path, cap: int | None) -> Fetched:
        limit = self.policy.max_bytes if cap is None else cap
        # The policy's one timeout bounds the whole download; the client's own would bound each read only.
        async with httpx.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=httpx.Timeout(self.policy.timeout)
        ) as client:
            for hop in range(self.policy.max_redirects + 1):
                origin = self.check_origin(url, argument)
                address = await self._pinned_address(url, origin, argument)
                target, headers, extensions = _pinned(url, address)
                async with client.stream("GET", target, headers=headers, extensions=extensions) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        if hop == self.policy.max_redirects:
                            raise InvalidRequest(
                                f"{argument}: the URL redirected more than {self.policy.max_redirects} "
                                f"times ({REDIRECTS_SETTING})",
                                argument=argument,
                                max_redirects=self.policy.max_redirects,
                            )
                        url = urljoin(url, location)
                        continue
                    if response.status_code != 200:
                        raise InvalidRequest(
                            f"{argument}: the URL answered HTTP {response.status_code}", argument=argument
                        )
                    length = response.headers.get("content-length", "")
                    if length.isdigit() and int(length) > limit:
                        raise self._too_large(argument, cap)
                    received = 0
                    async with await anyio.open_file(spool, "wb") as out:
                        async for piece in response.aiter_bytes(_PIECE):
                            received += len(piece)
                            if received > limit:
                                raise self._too_large(argument, cap)
                            await out.write(piece)
                    return Fetched(spool, received, response.headers.get("content-type"))
        raise AssertionError("unreachable: the last hop returns or raises")  # pragma: no cover

    def _too_large(self, argument: str, cap: int | None) -> BlobstoreError:
        if cap is not None:
            return LimitExceeded(
                f"{argument}: the file at the URL is more than the {cap} bytes this parameter takes",
                argument=argument,
                max_bytes=cap,
            )
        limit = self.policy.max_bytes
        return LimitExceeded(
            f"{argument}: the file at the URL is more than {limit} bytes ({self.policy.cap_setting})",
            argument=argument,
            max_argument_bytes=limit,
        )


def _pinned(url: str, address: IpAddress) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The URL, headers and extensions of a request for ``url`` sent to ``address``: the URL's host stays
    in ``Host`` and in the TLS server name (so the certificate is checked against it)."""
    parts = urlsplit(url)
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    target = parts._replace(netloc=netloc, fragment="").geturl()
    return target, {"Host": parts.netloc.rpartition("@")[2]}, {"sni_hostname": parts.hostname or ""}


__all__ = ["METADATA_ADDRESSES", "FetchPolicy", "Fetched", "UrlFetcher", "address_class", "origin_of"]
