// Drives headless Chromium through the console's session attacks and flows with playwright-core:
//
//   node sessions.mjs '<json config>'
//
// 1. a cookie tossed by a page on another port of 127.0.0.1 (`blobstore_console=<attacker's session>; path=/`)
//    while the admin is logged in, then a new login that clears it;
// 2. Log out, then the old cookie put back: the page and a DELETE with the old CSRF token;
// 3. Run cleanup, then a reload of the page it lands on.
//
// Prints one JSON line with what it saw; tests/console/test_browser_sessions.py asserts on it.
import { chromium } from "playwright-core";
import { launchHeadless } from "../../fixtures/js/headless_chromium.mjs";

const config = JSON.parse(process.argv[2]);
const seen = { console: [], steps: [], cleanupPosts: [] };
const { context, close } = await launchHeadless(chromium, config.chromium, {
  profilePrefix: "blobstore-console-sessions-",
  viewport: { width: 1280, height: 800 },
});
const page = context.pages()[0] ?? (await context.newPage());
page.setDefaultTimeout(config.stepTimeoutMs);
page.on("pageerror", (error) => seen.console.push(`pageerror: ${error.message}`));
page.on("request", (sent) => {
  const url = new URL(sent.url());
  if (url.pathname === "/console/operate/cleanup") seen.cleanupPosts.push(sent.method());
});
let step = "start";
const begin = (name) => {
  step = name;
  seen.steps.push(name);
};
// Whom the page says it acts as; null on a page of nobody's (the login form).
const who = async () => ((await page.locator(".who").count()) ? page.locator(".who").textContent() : null);
// Every cookie the browser keeps for the server's host (of any path: context.cookies(url) would filter by
// the URL's path too), as "name path".
const cookieList = async () =>
  (await context.cookies())
    .filter((c) => c.domain === new URL(config.server).hostname)
    .map((c) => `${c.name} ${c.path}`)
    .sort();
const csrfOfPage = () => page.evaluate(() => document.querySelector('meta[name="csrf-token"]')?.content ?? "");

async function login(token) {
  await page.goto(`${config.server}/console/login`);
  await page.locator("#token").fill(token);
  await Promise.all([page.waitForURL("**/console/artifacts"), page.locator("#login-submit").click()]);
}

// A change through the console's bridge to the API, sent by the page as its script would.
const bridged = (method, path, csrf, body) =>
  page.evaluate(
    async ({ method, path, csrf, body }) => {
      const init = { method, headers: { "X-CSRF-Token": csrf } };
      if (body !== undefined) {
        init.body = JSON.stringify(body);
        init.headers["Content-Type"] = "application/json";
      }
      const response = await fetch(`/console/api/v1${path}`, init);
      return { status: response.status, body: await response.text() };
    },
    { method, path, csrf, body },
  );

try {
  begin("login");
  await login(config.tokenA);
  seen.before = await who();

  begin("toss");
  // The attacker's page on another port of the same host sets its cookie for the whole host.
  await page.goto(config.attacker);
  seen.tossed = await cookieList();
  const upload = await page.goto(`${config.server}/console/upload`);
  seen.afterToss = {
    status: upload.status(),
    url: page.url(),
    who: await who(),
    notice: (await page.locator("#login-notice").count()) ? await page.locator("#login-notice").textContent() : null,
  };
  // Whatever CSRF token the page carries, an upload through the bridge lands nowhere.
  seen.afterToss.upload = await bridged("POST", "/uploads", await csrfOfPage(), { name: "tossed.bin" });
  seen.afterToss.cookies = await cookieList();

  begin("login-again");
  await login(config.tokenA);
  seen.relogged = { who: await who(), cookies: await cookieList() };

  begin("replay");
  const saved = (await context.cookies()).filter((c) => c.name === "blobstore_console");
  await page.goto(`${config.server}/console/artifacts/${config.artifactId}`);
  const oldCsrf = await csrfOfPage();
  await Promise.all([
    page.waitForURL("**/console/login**"),
    page.locator("form[action='/console/logout'] button").click(),
  ]);
  seen.loggedOut = { url: page.url(), cookies: await cookieList() };
  await context.addCookies(saved);
  const replayed = await page.goto(`${config.server}/console/artifacts/${config.artifactId}`);
  seen.replay = { status: replayed.status(), url: page.url(), who: await who() };
  seen.replay.delete = await bridged("DELETE", `/artifacts/${config.artifactId}`, oldCsrf);
  seen.replay.read = await bridged("GET", `/artifacts/${config.artifactId}`, oldCsrf);
  await context.clearCookies();

  begin("cleanup");
  await login(config.tokenA);
  await page.goto(`${config.server}/console/operate`);
  await Promise.all([page.waitForURL("**/console/operate**"), page.locator("#cleanup-run").click()]);
  await page.locator("#cleanup-summary").waitFor();
  seen.cleanup = { url: page.url(), summary: await page.locator("#cleanup-summary").textContent() };
  seen.cleanup.postsBeforeReload = seen.cleanupPosts.length;
  await page.reload();
  seen.cleanup.urlAfterReload = page.url();
  seen.cleanup.postsAfterReload = seen.cleanupPosts.length;
  seen.cleanup.summaryAfterReload = await page.locator("#cleanup-summary").count();
  begin("done");
} catch (error) {
  seen.failed = `${step}: ${error.message}`;
} finally {
  process.stdout.write(`${JSON.stringify(seen)}\n`);
  await close();
}
