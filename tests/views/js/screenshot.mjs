// One real screenshot for the OCR tests: the system's Chromium renders a page (Debian-shipped HTML
// documentation) at a given viewport and device scale, and the page's own text is kept as the truth.
// Usage: node screenshot.mjs CONFIG.json, where CONFIG is {chromium, url, png, text, width, height, scale}.
import { readFileSync, writeFileSync } from "node:fs";
import { chromium } from "playwright-core";
import { launchHeadless } from "../../fixtures/js/headless_chromium.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { context, close } = await launchHeadless(chromium, config.chromium, {
  profilePrefix: "blobstore-views-chromium-",
  viewport: { width: config.width, height: config.height },
  deviceScaleFactor: config.scale,
});
try {
  const page = await context.newPage();
  await page.goto(config.url, { waitUntil: "load" });
  await page.screenshot({ path: config.png });
  // The words visible in the viewport: the text of every element whose box lies inside it.
  const text = await page.evaluate(() => {
    const range = document.createRange();
    const words = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const found = node.textContent.matchAll(/\S+/g);
      for (const match of found) {
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const box = range.getBoundingClientRect();
        if (box.width > 0 && box.bottom <= window.innerHeight && box.right <= window.innerWidth && box.top >= 0) {
          words.push(match[0]);
        }
      }
    }
    return words.join(" ");
  });
  writeFileSync(config.text, text);
} finally {
  await close();
}
