// Drives headless Chromium (the system's /usr/bin/chromium) through the web console with playwright-core.
//
//   node drive.mjs '<json config>'
//
// Runs the whole visit and prints one JSON line with what it saw; tests/console/test_browser.py asserts on it
// and on the server's side. A step that fails prints {"failed": "<step>: <error>"} with what was seen so far.
import { join } from "node:path";
import { chromium, request } from "playwright-core";
import { launchHeadless } from "../../fixtures/js/headless_chromium.mjs";

const config = JSON.parse(process.argv[2]);
const seen = { dialogs: [], console: [], requests: [], steps: [] };
const { context, close } = await launchHeadless(chromium, config.chromium, {
  profilePrefix: "blobstore-console-chromium-",
  extraArgs: ["--autoplay-policy=no-user-gesture-required"],
  viewport: { width: 1280, height: 800 },
  acceptDownloads: true,
});
await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: config.server });
const page = context.pages()[0] ?? (await context.newPage());
page.setDefaultTimeout(config.stepTimeoutMs);
page.on("dialog", async (dialog) => {
  seen.dialogs.push(`${dialog.type()}: ${dialog.message()}`);
  await dialog.dismiss();
});
page.on("console", (message) => seen.console.push(`${message.type()}: ${message.text()}`));
page.on("pageerror", (error) => seen.console.push(`pageerror: ${error.message}`));
page.on("request", (sent) => {
  const url = new URL(sent.url());
  if (url.pathname.startsWith("/console/api/")) {
    seen.requests.push({ method: sent.method(), path: url.pathname, range: sent.headers().range ?? null });
  }
});

const shot = (name) => page.screenshot({ path: join(config.shots, `${name}.png`) });
const byId = (id) => page.locator(`#${id}`);
let step = "start";
const begin = (name) => {
  step = name;
  seen.steps.push(name);
};

async function login(token) {
  await page.goto(`${config.server}/console/login`);
  await byId("token").fill(token);
  await Promise.all([page.waitForURL("**/console/artifacts"), byId("login-submit").click()]);
}

async function uploadRows() {
  return page.$$eval("#uploads li", (rows) => rows.map((row) => ({ ...row.dataset })));
}

try {
  begin("login");
  await page.goto(`${config.server}/console/login`);
  await shot("login");
  await login(config.tokenA);

  begin("upload-until-held");
  await page.goto(`${config.server}/console/upload`);
  let chunkPuts = 0;
  let release;
  const held = new Promise((resolve) => (release = resolve));
  await page.route("**/console/api/v1/uploads/*/chunks/*", async (route) => {
    chunkPuts += 1;
    if (chunkPuts === config.holdChunk) {
      release(route); // never answered: the reload drops it, as a closed tab would
      return;
    }
    await route.continue();
  });
  await page.setInputFiles("#files", config.files);
  await held;
  seen.beforeReload = {
    rows: await uploadRows(),
    storage: await page.evaluate(() => Object.fromEntries(Object.entries(localStorage))),
    progress: await page.$eval("#uploads li progress", (bar) => [bar.value, bar.max]),
  };
  // What the server holds of it at this moment, asked as the page asks.
  seen.beforeReload.status = await page.evaluate(async (id) => {
    const response = await fetch(`/console/api/v1/uploads/${id}`);
    return response.json();
  }, seen.beforeReload.rows[0].uploadId);
  await shot("upload-held");

  begin("reload-and-resume");
  const putsBeforeReload = seen.requests.length;
  // The reload drops the held chunk with the page; only then is the route taken away (taking it away first
  // would let the held request go on to the server).
  await page.reload();
  await page.unroute("**/console/api/v1/uploads/*/chunks/*");
  await (await held).abort().catch(() => {});
  seen.pendingAfterReload = await page.$$eval("#pending li", (rows) => rows.map((row) => row.textContent));
  // After the reload the connection drops once more, mid-chunk: the page tries again.
  let dropped = false;
  await page.route("**/console/api/v1/uploads/*/chunks/*", async (route) => {
    if (!dropped) {
      dropped = true;
      await route.abort("connectionreset");
      return;
    }
    await route.continue();
  });
  await page.setInputFiles("#files", config.files);
  await page.waitForFunction(
    (count) => {
      const rows = [...document.querySelectorAll("#uploads li")];
      return rows.length === count && rows.every((row) => row.dataset.state === "done" || row.dataset.state === "failed");
    },
    config.files.length,
    { timeout: config.uploadTimeoutMs },
  );
  await page.unroute("**/console/api/v1/uploads/*/chunks/*");
  seen.pendingWhenDone = await page.$$eval("#pending li", (rows) => rows.map((row) => row.textContent));
  seen.afterReload = {
    rows: await uploadRows(),
    requests: seen.requests.slice(putsBeforeReload),
    storage: await page.evaluate(() => Object.fromEntries(Object.entries(localStorage))),
    dropped,
  };
  await shot("upload-done");

  begin("dedup");
  await page.setInputFiles("#files", [config.duplicate]);
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#uploads li")];
    return rows.length > 0 && rows.at(-1).dataset.state === "done";
  });
  seen.duplicate = (await uploadRows()).at(-1);
  seen.duplicateStatus = await page.$$eval("#uploads li .status", (rows) => rows.at(-1).textContent);

  begin("folder");
  await page.setInputFiles("#folder", config.folder);
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#uploads li")].filter((row) => row.dataset.path.includes("/"));
    return rows.length === 2 && rows.every((row) => row.dataset.state === "done");
  });
  seen.folder = (await uploadRows()).filter((row) => row.path.includes("/")).map((row) => row.path);

  begin("list");
  await page.goto(`${config.server}/console/artifacts`);
  seen.listed = await page.$$eval("#artifact-list td.name a", (links) => links.map((link) => link.textContent));
  await page
    .waitForFunction(() => [...document.querySelectorAll("#artifact-list td.thumb img")].every((image) => image.complete))
    .catch(() => {});
  seen.thumbnails = await page.$$eval("#artifact-list td.thumb img", (images) =>
    images.map((image) => image.complete && image.naturalWidth > 0),
  );
  await shot("artifacts");

  begin("image-preview");
  await page.goto(`${config.server}/console/artifacts/${config.imageId}`);
  await page.waitForFunction(() => document.getElementById("preview-image").naturalWidth > 0);
  const scaled = await byId("preview-image").evaluate((image) => image.naturalWidth);
  await byId("full-size").click();
  await page.waitForFunction(
    (before) => document.getElementById("preview-image").naturalWidth > before,
    scaled,
  );
  seen.image = { scaled, full: await byId("preview-image").evaluate((image) => image.naturalWidth) };
  await byId("verify").click();
  await page.waitForFunction(() => document.getElementById("verify-result").dataset.verified !== undefined);
  seen.verify = await byId("verify-result").textContent();
  await shot("image");

  begin("text-preview");
  await page.goto(`${config.server}/console/artifacts/${config.textId}`);
  seen.text = { head: (await byId("preview-text").textContent()).length };
  while ((await byId("more-text").count()) > 0) {
    const before = (await byId("preview-text").textContent()).length;
    await byId("more-text").click();
    await page.waitForFunction(
      (length) => document.getElementById("preview-text").textContent.length > length,
      before,
    );
  }
  seen.text.whole = await byId("preview-text").textContent();

  begin("pdf-preview");
  await page.goto(`${config.server}/console/artifacts/${config.pdfId}`);
  seen.pdf = {
    kind: await byId("preview").getAttribute("data-kind"),
    pages: (await byId("pdf-page").count()) > 0,
    facts: (await byId("pdf-facts").count()) > 0 ? await byId("pdf-facts").textContent() : null,
  };
  if (seen.pdf.pages) {
    await page.waitForFunction(() => document.getElementById("pdf-page").naturalWidth > 0);
    await page.waitForFunction(() => document.getElementById("pdf-text").textContent.length > 0);
    seen.pdf.text = [await byId("pdf-text").textContent()];
    seen.pdf.width = await byId("pdf-page").evaluate((image) => image.naturalWidth);
    await shot("pdf");
    await byId("pdf-next").click();
    await page.waitForFunction(() => document.getElementById("pdf-at").textContent === "2");
    await page.waitForFunction((first) => document.getElementById("pdf-text").textContent !== first, seen.pdf.text[0]);
    seen.pdf.text.push(await byId("pdf-text").textContent());
  } else {
    await shot("pdf");
  }

  begin("wav-preview");
  await page.goto(`${config.server}/console/artifacts/${config.wavId}`);
  await byId("preview-audio").evaluate((audio) => {
    audio.muted = true;
    return audio.play();
  });
  await page.waitForFunction(() => document.getElementById("preview-audio").currentTime > 0);
  seen.audio = {
    currentTime: await byId("preview-audio").evaluate((audio) => audio.currentTime),
    ranges: seen.requests.filter((sent) => sent.path.endsWith(`/${config.wavId}/content`) && sent.range),
  };
  await shot("audio");

  begin("share");
  await byId("share-expires").fill("1h");
  // POST/redirect/GET: the link is on the artifact's page the redirect lands on.
  await Promise.all([page.waitForEvent("load"), byId("share").click()]);
  const link = await byId("share-link").inputValue();
  await page.locator('button.copy[data-copy="share-link"]').click();
  await page.waitForFunction(() => document.querySelector('button.copy[data-copy="share-link"]').dataset.copied === "1");
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  await shot("share");
  const stranger = await request.newContext(); // no cookie, no token
  const fetched = await stranger.get(copied);
  seen.share = { link, copied, status: fetched.status(), size: (await fetched.body()).length };
  await byId("share-expires").fill(`${config.shortLinkSeconds}s`);
  await Promise.all([page.waitForEvent("load"), byId("share").click()]);
  const shortLink = await byId("share-link").inputValue();
  seen.share.shortBefore = (await stranger.get(shortLink)).status();
  await new Promise((resolve) => setTimeout(resolve, (config.shortLinkSeconds + 1.5) * 1000));
  const expired = await stranger.get(shortLink);
  seen.share.shortAfter = expired.status();
  await stranger.dispose();

  begin("hostile-name");
  await page.goto(`${config.server}/console/artifacts?q=onerror`);
  seen.hostileListed = await page.$$eval("#artifact-list td.name a", (links) => links.map((link) => link.textContent));
  await page.goto(`${config.server}/console/artifacts/${config.hostileId}`);
  seen.hostileName = await byId("artifact-name").textContent();
  seen.hostileSource = await byId("preview-text").textContent();
  const [download] = await Promise.all([page.waitForEvent("download"), byId("download").click()]);
  seen.hostileDownload = download.suggestedFilename();
  await download.cancel().catch(() => {});
  await page.waitForTimeout(500); // a script in either would have run by now

  begin("operate");
  await page.goto(`${config.server}/console/operate`);
  seen.usage = await page.$$eval("#usage tbody tr", (rows) => rows.map((row) => row.textContent));
  await shot("operate");
  await Promise.all([page.waitForEvent("load"), byId("cleanup-dry-run").click()]);
  seen.cleanupUrl = page.url();
  seen.cleanup = {
    summary: await byId("cleanup-summary").textContent(),
    steps: await page.$$eval("#cleanup-report tbody tr td:first-child", (cells) => cells.map((c) => c.textContent)),
  };
  await shot("cleanup");

  begin("delete");
  await page.goto(`${config.server}/console/artifacts/${seen.duplicate.artifactId}`);
  await page.locator("details.danger summary").click();
  await Promise.all([page.waitForURL("**/console/artifacts"), byId("delete").click()]);
  seen.afterDelete = await page.$$eval("#artifact-list tr", (rows) => rows.map((row) => row.dataset.id ?? ""));

  begin("other-namespace");
  await Promise.all([page.waitForURL("**/console/login?why=logout"), page.locator("form[action='/console/logout'] button").click()]);
  await login(config.tokenB);
  seen.otherListed = await page.$$eval("#artifact-list td.name a", (links) => links.map((link) => link.textContent));
  seen.otherEmpty = (await byId("no-artifacts").count()) > 0;
  await shot("other-namespace");
  const foreign = await page.goto(`${config.server}/console/artifacts/${config.imageId}`);
  seen.foreignStatus = foreign.status();
  begin("done");
} catch (error) {
  seen.failed = `${step}: ${error.message}`;
  await shot(`failed-${step}`).catch(() => {});
} finally {
  process.stdout.write(`${JSON.stringify(seen)}\n`);
  await close();
}
