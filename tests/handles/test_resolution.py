"""Artifact URIs in tool arguments are replaced by the artifact's bytes, as the caller, within the cap."""

from __future__ import annotations

import base64
import hashlib
import io
import random
from typing import Any

import pytest
from PIL import Image

from blobstore.errors import BlobstoreError, InvalidRange, LimitExceeded, NotFound
from blobstore.service import ArtifactService
from mcp_resources.tools.binary_schema import binary_sites
from mcp_resources.tools.handles import AUDIT_ACTION, ArgumentHandles
from tests.handles.conftest import CALLER, STRANGER, audit_lines, expired, put
from tests.views.media import marker, spoken_wav, text_pdf

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "image": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"},
        "document": {"type": "string", "format": "uri", "x-mcp-file": {}},
        "notes": {"type": "string", "contentMediaType": "text/plain"},
        "pages": {"type": "array", "items": {"type": "string", "format": "byte"}},
        "caption": {"type": "string"},
    },
}
SITES = binary_sites(SCHEMA)
PNG = b"\x89PNG\r\n\x1a\n" + random.Random(3).randbytes(5000)


async def resolve(service: ArtifactService, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    handles = ArgumentHandles(service, **options)
    resolved = await handles.resolve(CALLER, tool="checksum_image", arguments=arguments, sites=SITES)
    assert resolved is not None
    return resolved


async def refusal(service: ArtifactService, arguments: dict[str, Any], **options: Any) -> BlobstoreError:
    with pytest.raises(BlobstoreError) as caught:
        await resolve(service, arguments, **options)
    return caught.value


async def test_a_handle_becomes_the_bytes_in_the_form_each_argument_asks_for(
    service: ArtifactService,
) -> None:
    png = await put(service, PNG, "shot.png", "image/png")
    text = await put(service, "Grüße\n".encode(), "notes.txt", "text/plain")
    arguments = {
        "image": png.uri,
        "document": png.uri,
        "notes": text.uri,
        "pages": [png.uri, "AAAA"],
        "caption": png.uri,
    }
    resolved = await resolve(service, arguments)
    assert base64.b64decode(resolved["image"], validate=True) == PNG
    assert resolved["document"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert resolved["notes"] == "Grüße\n"
    assert base64.b64decode(resolved["pages"][0]) == PNG
    assert resolved["pages"][1] == "AAAA"
    # Where the schema wants plain text, a URI is left as the string it is.
    assert resolved["caption"] == png.uri
    # The caller's arguments are not changed in place.
    assert arguments["image"] == png.uri


async def test_a_window_uri_brings_only_its_bytes(service: ArtifactService) -> None:
    png = await put(service, PNG, "shot.png", "image/png")
    resolved = await resolve(
        service, {"image": f"{png.uri}?offset=100&length=50", "pages": [f"{png.uri}?offset=4990"]}
    )
    assert base64.b64decode(resolved["image"]) == PNG[100:150]
    assert base64.b64decode(resolved["pages"][0]) == PNG[4990:]


async def test_arguments_without_handles_are_returned_as_they_are(service: ArtifactService) -> None:
    arguments = {"image": "AAAA", "caption": "hello"}
    handles = ArgumentHandles(service)
    assert await handles.resolve(CALLER, tool="t", arguments=arguments, sites=SITES) is arguments
    assert await handles.resolve(CALLER, tool="t", arguments=None, sites=SITES) is None
    assert audit_lines(service, AUDIT_ACTION) == []


async def test_foreign_guessed_expired_and_missing_handles_are_the_same_not_found(
    service: ArtifactService,
) -> None:
    foreign = await put(service, PNG, "theirs.png", "image/png", caller=STRANGER)
    expiring = await expired(service, foreign)
    mine = await put(service, PNG, "mine.png", "image/png")
    await service.delete_artifact(CALLER, mine.id)
    guessed = "blobstore://artifacts/a_" + "x" * 24
    answers = []
    for uri in (
        foreign.uri,
        expiring.uri,
        mine.uri,
        guessed,
        "blobstore://artifacts/nonsense",
        "blobstore://artifacts/",
    ):
        exc = await refusal(service, {"image": uri})
        assert isinstance(exc, NotFound)
        answers.append((exc.code, exc.message, {k: v for k, v in exc.details.items() if k != "uri"}))
    assert len(set(map(repr, answers))) == 1
    assert answers[0][:2] == ("not_found", "image: artifact not found")
    assert audit_lines(service, AUDIT_ACTION) == []


async def test_a_handle_over_the_cap_is_refused_naming_the_cap_and_nothing_is_read(
    service: ArtifactService,
) -> None:
    big = await put(service, PNG, "big.png", "image/png")
    exc = await refusal(service, {"image": big.uri}, max_bytes=4096)
    assert isinstance(exc, LimitExceeded)
    assert "BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES" in exc.message
    assert "4096" in exc.message
    assert exc.details["max_argument_bytes"] == 4096
    # A window under the cap of the same artifact passes.
    resolved = await resolve(service, {"image": f"{big.uri}?offset=0&length=4096"}, max_bytes=4096)
    assert base64.b64decode(resolved["image"]) == PNG[:4096]


async def test_the_handles_of_one_call_together_stay_under_the_cap(service: ArtifactService) -> None:
    part = await put(service, PNG[:3000], "part.png", "image/png")
    exc = await refusal(service, {"pages": [part.uri, part.uri]}, max_bytes=5000)
    assert isinstance(exc, LimitExceeded)
    assert "pages[1]" in exc.message
    assert "BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES" in exc.message
    assert audit_lines(service, AUDIT_ACTION) == []


async def test_the_cap_defaults_to_twenty_mebibytes_from_the_settings(service: ArtifactService) -> None:
    assert ArgumentHandles(service).max_bytes == 20 * 1024 * 1024 == service.settings.proxy_max_argument_bytes


async def test_a_bad_window_and_non_utf8_text_are_precise_errors(service: ArtifactService) -> None:
    png = await put(service, PNG, "shot.png", "image/png")
    exc = await refusal(service, {"image": f"{png.uri}?offset=-1"})
    assert isinstance(exc, InvalidRange)
    exc = await refusal(service, {"notes": png.uri})
    assert exc.code == "invalid_request"
    assert "notes" in exc.message


async def test_each_resolved_handle_is_audited_with_tool_argument_and_sha256_never_content(
    service: ArtifactService,
) -> None:
    png = await put(service, PNG, "shot.png", "image/png")
    await resolve(service, {"image": png.uri, "pages": [png.uri]})
    lines = audit_lines(service, AUDIT_ACTION)
    assert [(line["tool"], line["argument"], line["sha256"], line["artifact_id"]) for line in lines] == [
        ("checksum_image", "image", hashlib.sha256(PNG).hexdigest(), png.id),
        ("checksum_image", "pages[0]", hashlib.sha256(PNG).hexdigest(), png.id),
    ]
    text = service.settings.resolved_audit_log.read_text()
    assert base64.b64encode(PNG[:30]).decode()[:20] not in text
    assert all(line["namespace"] == CALLER.namespace and line["result"] == "ok" for line in lines)


async def test_a_media_view_uri_brings_the_views_bytes_and_a_foreign_one_is_not_found(
    service: ArtifactService,
) -> None:
    pdf = await put(service, text_pdf(3), "doc.pdf", "application/pdf")
    theirs = await put(service, text_pdf(2), "theirs.pdf", "application/pdf", caller=STRANGER)
    resolved = await resolve(service, {"image": f"{pdf.uri}/pages/2.png", "notes": f"{pdf.uri}/pages/2.txt"})
    page = base64.b64decode(resolved["image"])
    assert page.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(page)) as image:
        assert image.width > 100
    assert marker(2) in resolved["notes"]
    exc = await refusal(service, {"image": f"{theirs.uri}/pages/1.png"})
    assert isinstance(exc, NotFound)
    assert exc.message == "image: artifact not found"
    (line,) = [line for line in audit_lines(service, AUDIT_ACTION) if line["argument"] == "image"]
    assert (line["sha256"], line["view"], line["mime_type"]) == (pdf.sha256, "image/png", "image/png")


async def test_a_transcript_uri_brings_what_was_said_as_text(service: ArtifactService) -> None:
    wav = await put(service, spoken_wav(["Front_Center", "Rear_Right"], gap=10.0), "said.wav", "audio/wav")
    resolved = await resolve(service, {"notes": f"{wav.uri}/transcript?start=5"})
    (line,) = resolved["notes"].splitlines()  # the first voice is before the window
    assert line.startswith("[11.")
    assert line.split()[-1] == "right"
