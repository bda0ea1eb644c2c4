"""The documented ``resource_link`` examples are what the code writes: each JSON example is taken from the
docs and compared, field for field, with the code's output for the artifact facts the docs give."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from blobstore.api.schemas import artifact_out
from blobstore.models import Artifact
from mcp_resources.results.content import resource_link_for

DOCS = Path(__file__).resolve().parents[2] / "docs"
_JSON_BLOCK = re.compile(r"```json\n(.*?)```", re.DOTALL)


def documented_json(doc: str, containing: str) -> dict[str, Any]:
    """The one ``json`` example block of ``docs/<doc>`` that contains ``containing``, parsed."""
    found = [b for b in _JSON_BLOCK.findall((DOCS / doc).read_text(encoding="utf-8")) if containing in b]
    assert len(found) == 1, f"{len(found)} json examples in {doc} contain {containing!r}"
    value: dict[str, Any] = json.loads(found[0])
    return value


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_resource_link_example_in_the_mcp_guide_is_what_resource_link_for_returns() -> None:
    documented = documented_json("mcp.md", '"type": "resource_link"')
    # The facts the guide states for its example: chart.png, a PNG of 2,970 bytes, 800x600 px.
    artifact = Artifact(
        id="a_q2V…",
        namespace="default",
        name="chart.png",
        mime_type="image/png",
        size=2970,
        sha256="5d41…",
        blob_id=1,
        created_at=when("2026-05-01T12:00:00Z"),
        expires_at=None,
        pinned=False,
        media={"width": 800, "height": 600, "format": "png"},
    )
    written = resource_link_for(artifact).model_dump(by_alias=True, exclude_none=True, mode="json")
    assert documented == written
    assert documented["description"] == "chart.png (image/png, 2.9 KiB, 800x600 px)"


def test_the_artifact_json_example_in_the_http_api_doc_is_what_the_api_returns() -> None:
    documented = documented_json("http-api.md", '"resource_link"')
    artifact = Artifact(
        id=documented["id"],
        namespace="default",
        name=documented["name"],
        mime_type=documented["mime_type"],
        size=documented["size"],
        sha256=documented["sha256"],
        blob_id=1,
        created_at=when(documented["created_at"]),
        expires_at=when(documented["expires_at"]),
        pinned=documented["pinned"],
        metadata=documented["metadata"],
        media=documented["media"],
    )
    written = artifact_out(artifact, "http://127.0.0.1:8420").model_dump(mode="json")
    assert documented == written
