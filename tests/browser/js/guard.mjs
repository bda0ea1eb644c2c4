// One headless Chromium for tests/browser/test_guard_browser.py, driven by playwright-core: the test sends one
// JSON command a line on stdin, the driver answers each with one JSON line on stdout ({"ok": true, ...} or
// {"ok": false, "error": "..."}), and closes the browser when stdin ends.
//
//   node guard.mjs '{"chromium": "/usr/bin/chromium", "resolverRules": "MAP ... , ...", "timeoutMs": 60000}'
//
// Chromium resolves names by the test's --host-resolver-rules (a rebinding name mapped to 127.0.0.1, every
// other name but loopback unresolvable: no request can leave the machine) and takes the test's self-signed
// certificate (--ignore-certificate-errors).
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";
import { launchHeadless } from "../../fixtures/js/headless_chromium.mjs";

const config = JSON.parse(process.argv[2]);
const emit = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);

const { context, close } = await launchHeadless(chromium, config.chromium, {
  profilePrefix: "blobstore-guard-chromium-",
  ignoreHTTPSErrors: true,
  extraArgs: [`--host-resolver-rules=${config.resolverRules}`, "--ignore-certificate-errors"],
});
context.setDefaultTimeout(config.timeoutMs);

// A page that records every request it makes and every Content-Security-Policy violation it meets.
async function openPage() {
  const page = await context.newPage();
  const requests = [];
  page.on("request", (request) => requests.push(request.url()));
  await page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener("securitypolicyviolation", (event) =>
      window.cspViolations.push(`${event.violatedDirective} ${event.blockedURI}`),
    );
  });
  return { page, requests };
}

// A page of another origin (the attacker's, on localhost) posts a multipart form into a hidden frame and a
// no-cors fetch with a text/plain body to the store; the statuses are what the network saw.
async function crossSiteWrites({ pageUrl, target }) {
  const { page } = await openPage();
  try {
    await page.goto(pageUrl);
    const formAnswer = page.waitForResponse((response) => response.url().includes("name=form-planted"));
    await page.evaluate((store) => {
      const frame = document.createElement("iframe");
      frame.name = "sink";
      document.body.append(frame);
      const form = document.createElement("form");
      form.method = "POST";
      form.enctype = "multipart/form-data";
      form.target = "sink";
      form.action = `${store}/v1/artifacts?name=form-planted.txt`;
      const input = document.createElement("input");
      input.type = "file";
      input.name = "file";
      const files = new DataTransfer();
      files.items.add(new File(["planted by a form"], "form-planted.txt", { type: "text/plain" }));
      input.files = files.files;
      form.append(input);
      document.body.append(form);
      form.submit();
    }, target);
    const form = await formAnswer;
    const fetchAnswer = page.waitForResponse((response) => response.url().includes("name=fetch-planted"));
    const opaque = await page.evaluate(async (store) => {
      const answer = await fetch(`${store}/v1/artifacts?name=fetch-planted.txt`, {
        method: "POST",
        mode: "no-cors",
        headers: { "Content-Type": "text/plain" },
        body: "planted by fetch",
      });
      return answer.type;
    }, target);
    const fetched = await fetchAnswer;
    return {
      form: { status: form.status(), origin: (await form.request().allHeaders()).origin ?? null },
      fetch: { status: fetched.status(), type: opaque },
    };
  } finally {
    await page.close();
  }
}

// The attacker's name, rebound to 127.0.0.1, opens the console and reads the list as its own origin.
async function rebind({ consoleUrl }) {
  const { page } = await openPage();
  try {
    const opened = await page.goto(consoleUrl);
    const list = await page.evaluate(async () => {
      const answer = await fetch("/v1/artifacts");
      return { status: answer.status, body: await answer.text(), origin: location.origin };
    });
    return { console: { status: opened.status(), text: await page.content() }, list };
  } finally {
    await page.close();
  }
}

// Log in to the console through its form, open an artifact's page and delete it with its form.
async function consoleDelete({ loginUrl, token, artifactId }) {
  const { page } = await openPage();
  try {
    await page.goto(loginUrl);
    await page.fill("#token", token);
    const loggedIn = page.waitForResponse((response) => response.url().endsWith("/console/login"));
    await page.click("#login-submit");
    const login = await loggedIn;
    await page.waitForLoadState("load");
    const landed = page.url();
    if (login.status() !== 303) return { login: login.status(), landed, page: await page.content() };
    const base = new URL(loginUrl).origin;
    const artifact = await page.goto(`${base}/console/artifacts/${artifactId}`);
    if (artifact.status() !== 200) return { login: login.status(), landed, artifact: artifact.status() };
    await page.click("details summary");
    const deleted = page.waitForResponse((response) => response.url().endsWith(`/${artifactId}/delete`));
    await page.click("#delete");
    const answer = await deleted;
    await page.waitForLoadState("load");
    const cookies = await context.cookies(`${base}/console/artifacts`);
    return {
      login: login.status(),
      landed,
      artifact: artifact.status(),
      delete: answer.status(),
      after: page.url(),
      cookie: cookies.map((cookie) => ({ name: cookie.name, secure: cookie.secure, path: cookie.path })),
    };
  } finally {
    await page.close();
  }
}

// /docs with every request recorded: Swagger UI must render the operations from this origin alone.
async function docs({ url }) {
  const { page, requests } = await openPage();
  try {
    const opened = await page.goto(url);
    const rendered = await page
      .waitForSelector(".opblock", { timeout: config.docsTimeoutMs })
      .then(() => true, () => false);
    const operations = await page.locator(".opblock").count();
    const title = await page.locator(".info .title").first().textContent().catch(() => null);
    const violations = await page.evaluate(() => window.cspViolations);
    return { status: opened.status(), headers: opened.headers(), rendered, operations, title, violations, requests };
  } finally {
    await page.close();
  }
}

const commands = { crossSiteWrites, rebind, consoleDelete, docs };
try {
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const { op, ...args } = JSON.parse(line);
    try {
      emit({ ok: true, ...(await commands[op](args)) });
    } catch (error) {
      emit({ ok: false, error: String(error?.stack ?? error) });
    }
  }
} finally {
  await close();
}
