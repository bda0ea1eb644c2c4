"""The web console's figures: the list page over 10,000 and 100,000 artifacts (first page and a deep keyset
page), thumbnail generation per image, and the bytes of a page load. Standalone; nothing asserted.

    .venv/bin/python bench/console.py                      # 10,000 and 100,000 artifacts, 15 runs each
    .venv/bin/python bench/console.py --counts 2000 --runs 5   # a quick look
    .venv/bin/python bench/console.py --browser            # plus first-contentful-paint in headless Chromium

The stores are filled through ``ArtifactService.create_artifact`` in process, 64 puts in flight; the bodies
cycle through 64 distinct small contents, so after the first 64 every put is a row over a live blob (what the
list reads) rather than a new file. The list page is then asked for by an in-process HTTP client logged into
the console (local mode), the first page and the page whose cursor is 50 artifacts from the end, alternating:
the time is the server's, from the request to the last byte of the HTML. ``--browser`` also loads both pages
in headless Chromium (``/usr/bin/chromium`` driven by playwright-core from ``tests/console/js``) against a
real ``blobstore serve`` and reports the ``first-contentful-paint`` the browser measured.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
from PIL import Image

from blobstore.api import create_app
from blobstore.api.console.thumbnails import make_thumbnail
from blobstore.config import Settings
from blobstore.models import Caller
from blobstore.runtime import open_service
from blobstore.service import encode_cursor

ROOT = Path(__file__).resolve().parent.parent
BASE = "http://127.0.0.1:8420"
IN_FLIGHT = 64
DISTINCT_BODIES = 64
PAGE = 50
CHROMIUM = Path("/usr/bin/chromium")
PLAYWRIGHT = ROOT / "tests" / "console" / "js" / "node_modules" / "playwright-core"


def fill(data_dir: Path, count: int) -> float:
    """``count`` artifacts in the ``default`` namespace (local mode); the seconds it took."""

    async def run() -> float:
        caller = Caller(namespace="default", actor="bench")
        bodies = [os.urandom(200) + bytes([index]) for index in range(DISTINCT_BODIES)]
        numbers = iter(range(count))
        async with open_service(Settings(data_dir=data_dir, io_threads=IN_FLIGHT)) as service:

            async def worker() -> None:
                for number in numbers:

                    async def one(data: bytes = bodies[number % DISTINCT_BODIES]) -> AsyncIterator[bytes]:
                        yield data

                    await service.create_artifact(
                        caller, one(), name=f"note-{number:06}.txt", ttl_seconds=86400
                    )

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(IN_FLIGHT):
                    group.start_soon(worker)
            return time.perf_counter() - started

    return anyio.run(run)


def deep_cursor(data_dir: Path) -> str:
    """The cursor of the page that starts ``PAGE`` artifacts before the end, by walking the keyset."""

    async def run() -> str:
        caller = Caller(namespace="default", actor="bench")
        async with open_service(Settings(data_dir=data_dir), server=False) as service:
            seen = []
            cursor = None
            while True:
                page = await service.list_artifacts(caller, limit=1000, cursor=cursor)
                seen.extend(page.items[-PAGE - 1 :])
                seen = seen[-PAGE - 1 :]
                if page.next_cursor is None:
                    return encode_cursor(seen[0])
                cursor = page.next_cursor

    return anyio.run(run)


def time_pages(data_dir: Path, cursor: str, runs: int) -> dict[str, object]:
    async def run() -> dict[str, object]:
        settings = Settings(data_dir=data_dir, access_log_level="off")
        app = create_app(settings)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as browser,
        ):
            await browser.post("/console/login", data={"local": "1"})
            first_times: list[float] = []
            deep_times: list[float] = []
            sizes: dict[str, int] = {}
            for index in range(runs + 1):  # one warm-up round
                for label, params in (("first", {}), ("deep", {"cursor": cursor})):
                    started = time.perf_counter()
                    answer = await browser.get("/console/artifacts", params=params)
                    elapsed = time.perf_counter() - started
                    if answer.status_code != 200 or answer.text.count("<tr data-id=") != PAGE:
                        raise SystemExit(f"{label} page: {answer.status_code}")
                    sizes[label] = len(answer.content)
                    if index:
                        (first_times if label == "first" else deep_times).append(elapsed)
            assets = {
                name: len((await browser.get(f"/console/static/{name}")).content)
                for name in ("console.css", "console.js")
            }
        return {
            "first_ms": statistics.median(first_times) * 1000,
            "deep_ms": statistics.median(deep_times) * 1000,
            "html_bytes": sizes,
            "assets": assets,
        }

    return anyio.run(run)


def image(width: int, height: int, fmt: str) -> bytes:
    picture = Image.effect_mandelbrot((width, height), (-2.0, -1.2, 1.0, 1.2), 64).convert("RGB")
    out = io.BytesIO()
    picture.save(out, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return out.getvalue()


def time_thumbnails(runs: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for width, height, fmt in ((1600, 1000, "PNG"), (4000, 3000, "JPEG"), (4000, 3000, "PNG")):
        data = image(width, height, fmt)
        for edge in (160, 1024):
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                made = make_thumbnail(data, edge)
                times.append(time.perf_counter() - started)
            rows.append(
                {
                    "source": f"{width}x{height} {fmt}, {len(data) // 1024} KiB",
                    "edge": edge,
                    "ms": statistics.median(times) * 1000,
                    "bytes": len(made.data),
                }
            )
    return rows


_FCP_SCRIPT = """
const { chromium } = require(process.argv[1]);
const [url, cursor, runs] = [process.argv[2], process.argv[3], Number(process.argv[4])];
(async () => {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  await page.goto(`${url}/console/login`);
  await page.click("#login-local");
  await page.waitForURL("**/console/artifacts");
  const out = { first: [], deep: [] };
  const fcp = () => page.evaluate(
    () => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null);
  for (let i = 0; i <= runs; i += 1) {
    const deep = `${url}/console/artifacts?cursor=${encodeURIComponent(cursor)}`;
    for (const [label, target] of [["first", `${url}/console/artifacts`], ["deep", deep]]) {
      await page.goto(target, { waitUntil: "load" });
      await page.waitForFunction(() => performance.getEntriesByName("first-contentful-paint").length > 0);
      if (i) out[label].push(await fcp());
    }
  }
  await browser.close();
  process.stdout.write(JSON.stringify(out));
})();
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def time_paint(data_dir: Path, cursor: str, runs: int) -> dict[str, float] | None:
    node = shutil.which("node")
    if node is None or not CHROMIUM.exists() or not PLAYWRIGHT.is_dir():
        return None
    port = free_port()
    blobstore = str(Path(sys.executable).with_name("blobstore"))
    command = [blobstore, "serve", "--port", str(port), "--data-dir", str(data_dir)]
    env = {key: value for key, value in os.environ.items() if not key.startswith("BLOBSTORE_")}
    env["BLOBSTORE_ACCESS_LOG_LEVEL"] = "off"
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        done = subprocess.run(
            [node, "-e", _FCP_SCRIPT, str(PLAYWRIGHT), url, cursor, str(runs)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
    finally:
        server.terminate()
        server.wait(30)
    painted = json.loads(done.stdout)
    return {label: statistics.median(values) for label, values in painted.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--counts", default="10000,100000", help="store sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--browser", action="store_true", help="also first-contentful-paint in Chromium")
    options = parser.parse_args()
    print("thumbnails (Pillow, one image at a time, median):")
    for row in time_thumbnails(max(3, options.runs // 3)):
        print(f"  {row['source']:<28} -> {row['edge']:>4} px: {row['ms']:7.1f} ms, {row['bytes']} bytes")
    for count in (int(text) for text in options.counts.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
            data_dir = Path(tmp) / "data"
            seconds = fill(data_dir, count)
            cursor = deep_cursor(data_dir)
            pages = time_pages(data_dir, cursor, options.runs)
            print(f"{count} artifacts (filled in {seconds:.1f} s):")
            print(
                f"  list page, server time to the last byte (median of {options.runs}): "
                f"first {pages['first_ms']:.1f} ms, deep {pages['deep_ms']:.1f} ms"
            )
            print(
                f"  bytes per page load: HTML {pages['html_bytes']}, assets {pages['assets']} (cached after)"
            )
            if options.browser:
                painted = time_paint(data_dir, cursor, max(3, options.runs // 3))
                if painted is None:
                    print("  first-contentful-paint: skipped (node, chromium or playwright-core missing)")
                else:
                    print(
                        f"  first-contentful-paint in Chromium: first {painted['first']:.0f} ms, "
                        f"deep {painted['deep']:.0f} ms"
                    )


if __name__ == "__main__":
    main()
