// Drives headless Chromium (the system's /usr/bin/chromium) through the page of page.mjs with playwright-core.
//
//   node drive.mjs '<json config>'
//
// Talks to the test in JSON lines: prints {"event": "stalled", ...} once the upload is held mid-file, waits
// for the line "reload" on stdin, reloads the page, resumes, reads a range, prints {"event": "done", ...}.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";
import { launchHeadless } from "../../fixtures/js/headless_chromium.mjs";

const config = JSON.parse(process.argv[2]);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

const { context, close } = await launchHeadless(chromium, config.chromium, { profilePrefix: "blobstore-chromium-" });
try {
  const page = context.pages()[0] ?? (await context.newPage());
  const consoleLines = [];
  page.on("console", (message) => consoleLines.push(`${message.type()}: ${message.text()}`));
  page.on("pageerror", (error) => consoleLines.push(`pageerror: ${error.message}`));
  const upload = { endpoint: config.endpoint, token: config.token, chunkSize: config.chunkSize };

  // First page: upload until `stallAfterPatches` PATCHes are through, then hold the next one.
  await page.goto(config.pageUrl);
  await page.evaluate((options) => {
    window.runUpload(options).then(
      (result) => (window.firstAttemptEnded = result),
      (error) => (window.firstAttemptEnded = { failed: [String(error)] }),
    );
  }, { ...upload, stallAfterPatches: config.stallAfterPatches });
  // Held mid-file, or (if the server refuses the page) ended: either way the test sees which.
  await page.waitForFunction(() => window.blobstoreStalled === true || window.firstAttemptEnded, null, {
    timeout: config.timeoutMs,
  });
  const first = await page.evaluate(() => ({
    stalled: window.blobstoreStalled === true,
    ended: window.firstAttemptEnded ?? null,
    log: window.blobstoreLog,
    uploadUrl: window.blobstoreUploadUrl ?? null,
    storage: Object.fromEntries(Object.entries(localStorage)),
  }));
  emit({ event: first.stalled ? "stalled" : "ended", ...first, console: consoleLines });
  if (!first.stalled) throw new Error("the first attempt ended instead of being held mid-file");

  const answer = await lines.next();
  if (answer.done || answer.value.trim() !== "reload") throw new Error(`expected "reload", got ${answer.value}`);

  // The interruption: a reload drops the page and its upload; only localStorage survives.
  await page.reload();
  const second = await page.evaluate((options) => window.runUpload(options), upload);
  const secondLog = await page.evaluate(() => window.blobstoreLog);
  let range = null;
  if (second.artifactId) {
    range = await page.evaluate((options) => window.readRange(options), {
      url: `${config.server}/v1/artifacts/${second.artifactId}/content`,
      token: config.token,
      start: config.rangeStart,
      end: config.rangeEnd,
    });
  }
  emit({ event: "done", ...second, log: secondLog, range, console: consoleLines });
} finally {
  await close();
  process.stdin.destroy();
}
