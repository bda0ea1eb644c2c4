"""Which names and origins are this server's own, and which peers may say so: the request guard's rules.

Sans-I/O, built once from the settings (``blobstore.api.request_guard`` applies them to every request, the
HTTP API, the console, share links, tus and ``/mcp`` alike):

- :class:`HostAllowList`: the names a ``Host`` header may carry. A page that rebinds its own DNS name to this
  server's address (DNS rebinding) makes the browser send that name, never one of these.
- :func:`request_origin` and :func:`public_origin`: the server's own origin, from the request (after a trusted
  proxy's forwarded headers) or from ``BLOBSTORE_PUBLIC_URL``, as a browser serializes it in ``Origin``.
- :class:`TrustedPeers`: the peers (``BLOBSTORE_FORWARDED_ALLOW_IPS``) whose ``X-Forwarded-*`` headers count,
  and the client address ``X-Forwarded-For`` names behind them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from blobstore.config import Settings

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
"""Always this machine; ``localhost`` resolves to loopback in every browser (RFC 6761 §6.3)."""
WILDCARD_BINDS: Final = frozenset({"0.0.0.0", "::", ""})
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6address][:port]`` (a ``Host`` header, RFC 9110 §7.2) as the lower-case name
    (IPv6 without brackets) and the port; None for anything else."""
    text = value.strip().lower()
    port: str | None = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return None
            port = rest[1:]
    else:
        name, colon, after = text.partition(":")
        if colon:
            port = after
    if not name or any(character in name for character in "/@ \\?#[]"):
        return None
    if port is None or port == "":
        return name, None
    if not port.isdigit() or int(port) > 65535:
        return None
    return name, int(port)


def _address(name: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HostAllowList:
    """The names a request's ``Host`` may carry (any port: a rebinding page chooses the name, not the port),
    and every IP address: an address cannot be rebound, only a name can (a page of another origin that sends
    to an address is cross-origin to it, and the ``Origin`` check covers what it sends). ``any_host``: every
    name (``BLOBSTORE_ALLOWED_HOSTS=*``, or a server that needs a token for every request and was given no
    names)."""

    names: frozenset[str]
    suffixes: tuple[str, ...] = ()
    any_host: bool = False

    def allows(self, name: str) -> bool:
        if self.any_host or name in self.names:
            return True
        if any(name == suffix[1:] or name.endswith(suffix) for suffix in self.suffixes):
            return True
        return _address(name) is not None

    def allows_header(self, value: str) -> bool:
        split = split_host(value)
        return split is not None and self.allows(split[0])


def host_allow_list(settings: Settings) -> HostAllowList:
    """Loopback names, the public URL's host and ``BLOBSTORE_ALLOWED_HOSTS`` (and every address).

    A server on all interfaces that was told none of its names cannot know them. Then, while it needs a
    bearer token for every request (no ``--insecure-no-auth``), it answers any name: a browser never sends a
    bearer token on its own, so a page that rebinds a name to it gets nothing a stranger would not. With
    ``--insecure-no-auth`` it answers loopback names and addresses only.
    """
    configured = settings.allowed_hosts
    if "*" in configured:
        return HostAllowList(frozenset(), any_host=True)
    names = set(LOOPBACK_NAMES)
    names.update(entry.strip("[]") for entry in configured if not entry.startswith("."))
    suffixes = tuple(entry for entry in configured if entry.startswith("."))
    bind = settings.host.strip("[]").lower()
    wildcard = bind in WILDCARD_BINDS
    if not wildcard:
        names.add(bind)  # a host name to bind to (an address passes anyway)
    public = urlsplit(settings.public_url).hostname if settings.public_url else None
    if public:
        names.add(public.lower())
    unnamed = wildcard and not configured and not public
    return HostAllowList(frozenset(names), suffixes, any_host=unnamed and not settings.insecure_no_auth)


def origin(scheme: str, name: str, port: int | None) -> str:
    """The origin as a browser serializes it (RFC 6454 §6.2): lower case, no default port."""
    shown = f"[{name}]" if ":" in name else name
    if port is None or port == DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


def request_origin(scheme: str, host: str) -> str | None:
    """The origin a request was sent to: its scheme and ``Host`` (both after a trusted proxy's headers)."""
    split = split_host(host)
    if split is None:
        return None
    return origin(scheme.lower(), *split)


def public_origin(settings: Settings) -> str | None:
    """The origin of ``BLOBSTORE_PUBLIC_URL``, if set."""
    if not settings.public_url:
        return None
    parts = urlsplit(settings.public_url)
    if not parts.hostname:
        return None
    return origin(parts.scheme.lower(), parts.hostname.lower(), parts.port)


def allowed_origins(settings: Settings) -> frozenset[str]:
    """Origins whose pages may send state-changing requests besides the request's own: the public URL's and
    ``BLOBSTORE_CORS_ORIGINS``."""
    found = set(settings.cors_origins)
    public = public_origin(settings)
    if public is not None:
        found.add(public)
    return frozenset(found)


class TrustedPeers:
    """The peers whose ``X-Forwarded-*`` headers are believed (``BLOBSTORE_FORWARDED_ALLOW_IPS``)."""

    def __init__(self, entries: Iterable[str]) -> None:
        listed = tuple(entries)
        self.everyone = "*" in listed
        self.networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(entry, strict=False) for entry in listed if entry != "*"
        )

    def trusts(self, peer: str | None) -> bool:
        if self.everyone:
            return True
        address = _address(peer) if peer else None
        return address is not None and any(address in network for network in self.networks)

    def client(self, forwarded_for: str) -> str | None:
        """The client ``X-Forwarded-For`` names: the last entry not itself a trusted peer (each proxy appends
        the address it was connected from), or the first when all are; None when the header is empty."""
        hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        return hops[0] if hops else None


def last_value(value: str) -> str:
    """The last item of a comma-separated header: the one the nearest proxy (the trusted one) wrote."""
    return value.rsplit(",", 1)[-1].strip()
