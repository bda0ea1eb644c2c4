"""URL inputs of file parameters and their guard against server-side request forgery, each refusal on a real
listening socket: the file services here are HTTP servers on loopback addresses, which the guard refuses
unless ``BLOBSTORE_FILE_DOWNLOAD_NETWORKS`` lists them."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import logging
import socket
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Annotated, Any

import pytest
from mcp import Client
from mcp.server import MCPServer

from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from mcp_resources.embed import Image, MediaLimits, embed_store
from mcp_resources.tools.file_params import FileInput
from mcp_resources.tools.url_fetch import address_class
from tests.fixtures.threaded_http import serving_on_a_thread
from tests.handles.conftest import CALLER

DATA = bytes(range(256)) * 64
Route = Callable[[BaseHTTPRequestHandler], None]


def body(data: bytes, *, length: bool = True) -> Route:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        if length:
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        # No length: the body ends when the connection does, so only the bytes themselves tell its size.
        handler.send_header("Connection", "close")
        handler.end_headers()
        for start in range(0, len(data), 4096):
            handler.wfile.write(data[start : start + 4096])

    return answer


def redirect(location: str, status: int = 302) -> Route:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


@contextlib.contextmanager
def site(routes: dict[str, Route], host: str = "127.0.0.1") -> Iterator[tuple[str, list[str]]]:
    """A file service on ``host`` answering ``routes`` by path; yields its origin and the paths asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            asked.append(path)
            route = routes.get(path)
            if route is None:
                self.send_error(404)
                return
            route(self)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving_on_a_thread(Handler, host=host) as origin:
        yield origin, asked


@contextlib.contextmanager
def silent_listener() -> Iterator[str]:
    """A socket that listens and never answers: connections complete in its backlog and wait forever."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def tool_server(service: ArtifactService) -> MCPServer:
    mcp = MCPServer("fetcher")
    embed_store(mcp, service, caller=CALLER)

    @mcp.tool()
    async def digest(file: FileInput) -> dict[str, Any]:
        """sha256, size and name of a file."""
        hasher = hashlib.sha256()
        async for piece in file.stream():
            hasher.update(piece)
        return {"sha256": hasher.hexdigest(), "size": file.size, "name": file.name, "url": file.url}

    @mcp.tool()
    async def typed(image: Annotated[Image, MediaLimits(max_bytes=20_000)]) -> dict[str, Any]:
        """Size and format of a typed image."""
        return {"size": image.size, "format": image.format}

    return mcp


async def call(settings: Settings, argument: Any, tool: str = "digest") -> dict[str, Any]:
    async with open_service(settings) as service, Client(tool_server(service)) as client:
        result = await client.call_tool(tool, {"file" if tool == "digest" else "image": argument})
    assert result.structured_content is not None, result.content
    return dict(result.structured_content)


def settings_for(tmp_path: Path, origins: tuple[str, ...], **more: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", file_download_origins=origins, **more)


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" in answer, answer
    return dict(answer["error"])


async def test_a_url_string_is_fetched_from_an_allowed_origin_and_network(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with site({"/scans/page%201.bin": body(DATA)}) as (origin, asked):
        settings = settings_for(tmp_path, (origin,), file_download_networks=("127.0.0.1/32",))
        url = f"{origin}/scans/page%201.bin?sig=s3cr3t-signature"
        answer = await call(settings, url)
    assert answer == {
        "sha256": hashlib.sha256(DATA).hexdigest(),
        "size": len(DATA),
        "name": "page 1.bin",
        "url": url,
    }
    assert asked == ["/scans/page%201.bin"]
    # The URL may carry a signature: no log line holds it (httpx's request line included).
    assert "s3cr3t-signature" not in caplog.text


async def test_a_loopback_address_is_refused_and_never_connected_to(tmp_path: Path) -> None:
    with site({"/f": body(DATA)}) as (origin, asked):
        refused = error_of(await call(settings_for(tmp_path, (origin,)), f"{origin}/f?sig=secret"))
    assert refused["code"] == "invalid_request"
    assert refused["addressClass"] == "loopback"
    assert "BLOBSTORE_FILE_DOWNLOAD_NETWORKS" in refused["message"]
    assert origin in refused["message"]
    assert "secret" not in refused["message"]
    assert "/f" not in refused["message"]
    assert asked == []


async def test_a_name_that_resolves_to_loopback_is_refused(tmp_path: Path) -> None:
    with site({"/f": body(DATA)}) as (origin, asked):
        named = origin.replace("127.0.0.1", "localhost")
        refused = error_of(await call(settings_for(tmp_path, (named,)), f"{named}/f"))
    assert refused["addressClass"] == "loopback"
    assert asked == []


async def test_the_chatgpt_download_object_goes_through_the_same_guard(tmp_path: Path) -> None:
    with site({"/f": body(DATA)}) as (origin, asked):
        refused = error_of(
            await call(settings_for(tmp_path, (origin,)), {"download_url": f"{origin}/f", "file_id": "f"})
        )
    assert refused["addressClass"] == "loopback"
    assert asked == []


async def test_an_origin_not_listed_is_refused_naming_the_origin_only(tmp_path: Path) -> None:
    with site({"/f": body(DATA)}) as (origin, asked):
        refused = error_of(
            await call(
                settings_for(tmp_path, (), file_download_networks=("127.0.0.0/8",)), f"{origin}/f?sig=secret"
            )
        )
    assert refused["origin"] == origin
    assert "BLOBSTORE_FILE_DOWNLOAD_ORIGINS" in refused["message"]
    assert "secret" not in refused["message"]
    assert asked == []


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://10.1.2.3/f", "private"),
        ("http://[fd00:ec2::254]/latest", "cloud metadata"),
        ("http://[::ffff:127.0.0.1]:9/f", "loopback"),
    ],
)
async def test_internal_literal_addresses_are_refused_before_any_connection(
    tmp_path: Path, url: str, kind: str
) -> None:
    origin = url.split("/", 3)[0] + "//" + url.split("/", 3)[2]
    refused = error_of(await call(settings_for(tmp_path, (origin,)), url))
    assert refused["addressClass"] == kind


async def test_each_redirect_hop_is_checked_again(tmp_path: Path) -> None:
    # The first service is on an allowed address; it redirects to a listed origin on one that is not.
    with (
        site({"/f": body(DATA)}, host="127.0.0.1") as (inner, inner_asked),
        site({"/go": redirect(f"{inner}/f")}, host="127.0.0.2") as (outer, outer_asked),
    ):
        settings = settings_for(tmp_path, (outer, inner), file_download_networks=("127.0.0.2/32",))
        refused = error_of(await call(settings, f"{outer}/go"))
    assert refused["addressClass"] == "loopback"
    assert refused["origin"] == inner
    assert outer_asked == ["/go"]
    assert inner_asked == []


async def test_a_redirect_to_an_origin_not_listed_is_refused(tmp_path: Path) -> None:
    with (
        site({"/f": body(DATA)}) as (other, other_asked),
        site({"/go": redirect(f"{other}/f", 307)}, host="127.0.0.2") as (outer, _),
    ):
        settings = settings_for(tmp_path, (outer,), file_download_networks=("127.0.0.0/8",))
        refused = error_of(await call(settings, f"{outer}/go"))
    assert refused["origin"] == other
    assert other_asked == []


async def test_redirects_are_followed_a_few_times_only(tmp_path: Path) -> None:
    hops = {f"/{i}": redirect(f"/{i + 1}") for i in range(6)}
    with site({**hops, "/6": body(DATA)}) as (origin, asked):
        allowed = {"file_download_networks": ("127.0.0.1/32",)}
        refused = error_of(await call(settings_for(tmp_path, (origin,), **allowed), f"{origin}/0"))
        asked_before = list(asked)
        asked.clear()
        fetched = await call(
            settings_for(tmp_path, (origin,), file_download_max_redirects=6, **allowed), f"{origin}/0"
        )
    assert refused["maxRedirects"] == 3
    assert "BLOBSTORE_FILE_DOWNLOAD_MAX_REDIRECTS" in refused["message"]
    assert asked_before == ["/0", "/1", "/2", "/3"]
    assert fetched["size"] == len(DATA)
    assert asked == [f"/{i}" for i in range(7)]


@pytest.mark.parametrize("length", [True, False])
async def test_the_size_cap_holds_while_the_body_streams(
    tmp_path: Path, length: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    spools = tmp_path / "tmp"
    spools.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spools))
    big = DATA * 8
    with site({"/big": body(big, length=length)}) as (origin, _):
        settings = settings_for(
            tmp_path,
            (origin,),
            file_download_networks=("127.0.0.1/32",),
            proxy_max_argument_bytes=len(big) - 1,
        )
        refused = error_of(await call(settings, f"{origin}/big"))
    assert refused["code"] == "limit_exceeded"
    assert refused["maxArgumentBytes"] == len(big) - 1
    assert list(spools.iterdir()) == []


async def test_a_timeout_bounds_a_download_that_never_answers(tmp_path: Path) -> None:
    with silent_listener() as origin:
        settings = settings_for(
            tmp_path,
            (origin,),
            file_download_networks=("127.0.0.1/32",),
            file_download_timeout_seconds=0.5,
        )
        refused = error_of(await call(settings, f"{origin}/never"))
    assert refused["timeoutSeconds"] == 0.5
    assert "BLOBSTORE_FILE_DOWNLOAD_TIMEOUT_SECONDS" in refused["message"]


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("100.100.100.200", "cloud metadata"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("::ffff:10.0.0.1", "private"),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
    ],
)
def test_address_classes(address: str, kind: str | None) -> None:
    assert address_class(ipaddress.ip_address(address)) == kind


def test_shared_address_space_is_not_public() -> None:
    assert address_class(ipaddress.ip_address("100.64.0.1")) is not None


@pytest.mark.parametrize("length", [True, False])
async def test_a_typed_parameters_max_bytes_bounds_its_download_whatever_the_argument_cap(
    tmp_path: Path, length: bool
) -> None:
    picture = b"\x89PNG\r\n\x1a\n" + bytes(15_000)
    with site({"/ok.png": body(picture, length=length), "/big.png": body(picture * 2, length=length)}) as (
        origin,
        _,
    ):
        settings = settings_for(
            tmp_path, (origin,), file_download_networks=("127.0.0.1/32",), proxy_max_argument_bytes=1000
        )
        fetched = await call(settings, f"{origin}/ok.png", tool="typed")
        refused = error_of(await call(settings, f"{origin}/big.png", tool="typed"))
    # 15 KB is over the argument cap (1000) but within the parameter's 20,000 bytes: the parameter decides.
    assert fetched == {"size": len(picture), "format": "png"}
    assert (refused["code"], refused["maxBytes"]) == ("limit_exceeded", 20_000)
    assert "this parameter takes" in refused["message"]
