"""``/docs``: Swagger UI from the package's own files (``blobstore/api/swagger``), pinned by digest, with its
licence, under the console's headers, with no inline script; in a real browser with no route to any other
site in ``tests/browser/test_guard_browser.py``."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from blobstore.api import create_app
from tests.fixtures.asgi import app_client
from tests.fixtures.settings import make_settings

SWAGGER = Path(__file__).resolve().parents[2] / "blobstore" / "api" / "swagger"
PINNED = {
    "swagger-ui-bundle.js": "e6a898692f2d768e807c3ba4626068a69a2c5dd960dd6c76f3e4d3a3de180af2",
    "swagger-ui.css": "5ed08757e53da3e026d6cbecc61fe5d43585c9560b302d534ad56692519a273d",
}
"""swagger-ui-dist 5.35.0 from npm, unchanged."""


def test_the_shipped_swagger_ui_is_the_pinned_release_with_its_licence() -> None:
    notes = (SWAGGER / "VERSION.md").read_text()
    for name, digest in PINNED.items():
        assert hashlib.sha256((SWAGGER / name).read_bytes()).hexdigest() == digest, name
        assert f"| `{name}` | `{digest}` |" in notes
    assert "Apache License" in (SWAGGER / "LICENSE").read_text()
    assert "SmartBear" in (SWAGGER / "NOTICE").read_text()


async def test_the_docs_page_and_its_files_carry_the_page_headers_and_no_inline_script(
    tmp_path: Path,
) -> None:
    async with app_client(create_app(make_settings(tmp_path))) as client:
        page = await client.get("/docs")
        files = {
            name: await client.get(f"/docs/assets/{name}")
            for name in ("swagger-ui-bundle.js", "swagger-ui.css", "start.js")
        }
        head = await client.head("/docs")
    assert page.status_code == 200
    assert head.status_code == 200
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.text, re.DOTALL)
    assert scripts
    assert all('src="/docs/assets/' in attributes and not body.strip() for attributes, body in scripts)
    assert "//" not in re.sub(r"<!DOCTYPE[^>]*>", "", page.text).replace("/docs/assets/", "")
    for answer in (page, head, *files.values()):
        assert answer.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self';")
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert files["swagger-ui-bundle.js"].content == (SWAGGER / "swagger-ui-bundle.js").read_bytes()
    assert files["start.js"].headers["content-type"].startswith("text/javascript")
