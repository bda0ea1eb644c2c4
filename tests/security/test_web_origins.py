"""The request guard's rules without I/O (``blobstore.web_origins``): the names a server answers to for each
way it is bound, the origins it counts as its own, the peers whose forwarded headers count, the settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.config import Settings, SettingsError, load_settings
from blobstore.web_origins import (
    TrustedPeers,
    allowed_origins,
    host_allow_list,
    public_origin,
    request_origin,
    split_host,
)


def test_a_server_on_all_interfaces_with_tokens_answers_any_name_and_without_them_only_addresses() -> None:
    with_tokens = host_allow_list(Settings(host="0.0.0.0"))
    assert with_tokens.allows_header("anything.example:8420")
    open_to_all = host_allow_list(Settings(host="0.0.0.0", insecure_no_auth=True))
    assert open_to_all.allows_header("192.0.2.7:8420")
    assert open_to_all.allows_header("[2001:db8::1]:8420")
    assert open_to_all.allows_header("localhost:8420")
    assert not open_to_all.allows_header("rebind.attacker.example:8420")
    named = host_allow_list(Settings(host="0.0.0.0", public_url="https://store.example.com"))
    assert named.allows_header("store.example.com")
    assert not named.allows_header("anything.example")
    assert named.allows_header("192.0.2.7")  # a probe by the pod's address: no name to rebind
    bound = host_allow_list(Settings(host="store.internal"))
    assert bound.allows_header("store.internal:8420")
    assert not bound.allows_header("other.internal:8420")


def test_trusted_peers_and_the_client_behind_them() -> None:
    peers = TrustedPeers(("127.0.0.0/8", "::1", "10.0.0.0/8"))
    assert peers.trusts("127.0.0.1")
    assert peers.trusts("::1")
    assert peers.trusts("10.1.2.3")
    assert not peers.trusts("192.0.2.1")
    assert not peers.trusts(None)
    assert not peers.trusts("unix")
    assert peers.client("203.0.113.9, 10.0.0.2, 127.0.0.1") == "203.0.113.9"
    assert peers.client("198.51.100.1, 203.0.113.9, 10.0.0.2") == "203.0.113.9"
    assert peers.client("10.0.0.5, 127.0.0.1") == "10.0.0.5"
    assert peers.client(" , ") is None
    assert TrustedPeers(("*",)).trusts("192.0.2.1")


def test_origins_are_serialized_as_browsers_send_them() -> None:
    assert request_origin("http", "127.0.0.1:80") == "http://127.0.0.1"
    assert request_origin("https", "Store.Example.com:443") == "https://store.example.com"
    assert request_origin("https", "[::1]:8443") == "https://[::1]:8443"
    assert request_origin("http", "bad host") is None
    assert (
        public_origin(Settings(public_url="https://Store.example.com:443/base/"))
        == "https://store.example.com"
    )
    assert allowed_origins(
        Settings(public_url="http://a.example:8080", cors_origins="https://b.example")
    ) == {
        "http://a.example:8080",
        "https://b.example",
    }


@given(st.text(max_size=40))
def test_split_host_never_fails_and_gives_a_clean_name(value: str) -> None:
    split = split_host(value)
    if split is not None:
        name, port = split
        assert name
        assert name == name.lower()
        assert not any(c in name for c in "/@ []")
        assert port is None or 0 <= port <= 65535


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("allowed_hosts", "evil.example/path"),
        ("allowed_hosts", "a b"),
        ("forwarded_allow_ips", "proxy.example"),
        ("public_url", "store.example.com"),
        ("public_url", "ftp://store.example.com"),
    ],
)
def test_the_settings_refuse_what_they_cannot_match(setting: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"BLOBSTORE_{setting.upper()}"):
        load_settings(**{setting: value})


def test_the_settings_are_comma_separated_lists() -> None:
    settings = load_settings(
        allowed_hosts=" Files.Example.org, .lan.example ,", forwarded_allow_ips="10.0.0.1,::1"
    )
    assert settings.allowed_hosts == ("files.example.org", ".lan.example")
    assert settings.forwarded_allow_ips == ("10.0.0.1/32", "::1/128")
    assert Settings().forwarded_allow_ips == ("127.0.0.0/8", "::1/128")
