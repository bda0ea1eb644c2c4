"""The app factory: extensions get the running runtime and are mounted at their path."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from blobstore.api import create_app
from blobstore.api.deps import STATE_KEY, AppState, app_state
from blobstore.config import Settings
from blobstore.runtime import Runtime
from blobstore.service import ArtifactService
from tests.api.conftest import Uploader
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings


class RecordingExtension:
    path = "/ext"

    def __init__(self) -> None:
        self.events: list[str] = []
        self.service: ArtifactService | None = None

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        await PlainTextResponse(f"mounted {scope['path']}")(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(self, runtime: Runtime) -> AsyncIterator[None]:
        self.service = runtime.service
        self.events.append("enter")
        yield
        self.events.append("exit")


async def test_extension_lifespan_gets_the_service_and_its_app_is_mounted(
    settings: Settings, service: ArtifactService
) -> None:
    extension = RecordingExtension()
    app = create_app(settings, service=service, extensions=[extension])
    async with app.router.lifespan_context(app):
        assert extension.events == ["enter"]
        assert extension.service is service
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as http:
            response = await http.get("/ext/anything")
        assert response.text.startswith("mounted")
    assert extension.events == ["enter", "exit"]
    assert not hasattr(app.state, "blobstore")


async def test_lifespan_opens_and_closes_its_own_service(settings: Settings) -> None:
    app = create_app(settings)
    async with app_client(app, "http://127.0.0.1") as http:
        created = await http.post("/v1/artifacts", params={"name": "a"}, content=b"abc")
        assert created.status_code == 201
    assert not hasattr(app.state, "blobstore")


async def test_a_trailing_slash_is_an_unknown_path_not_a_redirect(
    client: httpx.AsyncClient, upload: Uploader
) -> None:
    stored = await upload(b"some bytes")
    artifact_id = stored["id"]
    created = await client.post("/v1/uploads", json={"name": "x.bin", "size": 4})
    assert created.status_code == 201, created.text
    upload_id = created.json()["upload_id"]
    for method, path in [
        ("GET", f"/v1/artifacts/{artifact_id}/"),
        ("PATCH", f"/v1/artifacts/{artifact_id}/"),
        ("DELETE", f"/v1/artifacts/{artifact_id}/"),
        ("GET", f"/v1/artifacts/{artifact_id}/content/"),
        ("GET", "/v1/artifacts/"),
        ("GET", f"/v1/uploads/{upload_id}/"),
        ("GET", "/healthz/"),
    ]:
        response = await client.request(method, path)
        assert response.status_code == 404, (method, path, response.status_code)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "not_found"
        assert "location" not in response.headers
    # The artifact is untouched and the exact paths still answer.
    assert (await client.get(f"/v1/artifacts/{artifact_id}")).status_code == 200
    assert (await client.get(f"/v1/uploads/{upload_id}")).status_code == 200


async def test_a_method_a_path_lacks_is_405_with_every_method_it_has_in_allow(
    client: httpx.AsyncClient, upload: Uploader
) -> None:
    artifact_id = (await upload(b"bytes"))["id"]
    response = await client.request("OPTIONS", f"/v1/artifacts/{artifact_id}")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"DELETE", "GET", "HEAD", "PATCH"}
    tus = await client.post("/tus/u_AAAAAAAAAAAAAAAAAAAAAAAA")  # no X-HTTP-Method-Override, no Tus-Resumable
    assert tus.status_code == 405
    assert "PATCH" in tus.headers["allow"]


async def test_the_content_path_refuses_other_methods_than_get_and_head_as_a_problem(
    client: httpx.AsyncClient, upload: Uploader
) -> None:
    artifact_id = (await upload(b"bytes"))["id"]
    response = await client.delete(f"/v1/artifacts/{artifact_id}/content")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert response.headers["content-type"] == "application/problem+json"
    assert (await client.head(f"/v1/artifacts/{artifact_id}/content")).headers["content-length"] == "5"


async def test_the_openapi_document_names_the_problem_answers_and_the_limits_of_the_settings(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    schema = (await client.get("/openapi.json")).json()
    get_artifact = schema["paths"]["/v1/artifacts/{artifact_id}"]["get"]["responses"]
    assert "422" not in get_artifact  # FastAPI's validation shape is never sent
    assert set(get_artifact["4XX"]["content"]) == {"application/problem+json"}
    create = schema["paths"]["/v1/uploads"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert str(settings.max_artifact_size) in str(create["properties"]["size"])
    tus_head = schema["paths"]["/tus/{upload_id}"]["head"]["parameters"]
    assert {"name": "Tus-Resumable", "required": True}.items() <= next(
        p for p in tus_head if p["name"] == "Tus-Resumable"
    ).items()


def test_the_apps_state_is_found_with_and_without_starlettes_state_dict(tmp_path: Path) -> None:
    """``app_state`` reads Starlette's ``State`` dict directly; a ``state`` of another shape, by name."""
    settings = make_settings(tmp_path)
    state = AppState(settings=settings, runtime=cast(Runtime, None))
    app = create_app(settings)
    setattr(app.state, STATE_KEY, state)
    assert app_state(app) is state
    other = SimpleNamespace(state=SimpleNamespace(**{STATE_KEY: state}))
    assert app_state(cast(Starlette, other)) is state
    with pytest.raises(RuntimeError, match="not started"):
        app_state(cast(Starlette, SimpleNamespace(state=SimpleNamespace())))
