// Opens a run's page in the distribution's Chromium and reads its timeline, then follows the
// link to its protocol's statistics: `node timeline.mjs CHROMIUM RUN_URL [NAME] SCREENSHOT_DIR`.
// Prints one JSON line: each effect attempt's bar (effect, attempt, timeout) in the order drawn,
// the states with visits, the rows nested under another (a map's items, child protocols and
// what they did: depth, kind, label, in the order drawn) and the child protocols' links, and the
// statistics page's retry line and outcome bars; a screenshot of the run's page (`NAME.png`,
// `run-timeline.png` by default, whose statistics' page is `stats.png`).
import { chromium } from "playwright-core";

const [chromiumPath, url, ...rest] = process.argv.slice(2);
const screenshots = rest.pop();
const name = rest[0] ?? "run-timeline";
const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(url, { waitUntil: "domcontentloaded" });
  await page.locator("#timeline rect.attempt").first().waitFor({ timeout: 30000 });
  const attempts = await page.$$eval("#timeline rect.attempt", (bars) => bars.map((bar) => ({
    effect: bar.dataset.effect,
    attempt: Number(bar.dataset.attempt),
    timeout_ms: Number(bar.dataset.timeoutMs),
  })));
  const states = await page.$$eval("#timeline rect.visit", (bars) => [...new Set(bars.map((bar) => bar.dataset.state))]);
  const nested = await page.$$eval("#timeline text.row-label", (labels) => labels
    .filter((label) => Number(label.dataset.depth) > 0)
    .map((label) => ({ depth: Number(label.dataset.depth), kind: label.classList[1].slice("row-".length), label: label.textContent })));
  const links = await page.$$eval("#timeline a.child-link", (links) => links.map((link) => link.getAttribute("href")));
  await page.screenshot({ path: `${screenshots}/${name}.png`, fullPage: true });
  await page.locator("a.stats-link").click();
  await page.locator(".chart-outcomes rect").first().waitFor({ state: "attached", timeout: 30000 });
  const retries = await page.locator("#retry-success").textContent();
  const outcomes = await page.$$eval(".chart-outcomes rect", (bars) => bars.map((bar) => ({
    action: bar.dataset.item, part: bar.dataset.part, value: Number(bar.dataset.value),
  })));
  // The statistics' screenshot is the default run's (the timeout wrapper's) alone.
  if (name === "run-timeline") await page.screenshot({ path: `${screenshots}/stats.png`, fullPage: true });
  console.log(JSON.stringify({ attempts, states, nested, links, retries, outcomes }));
} catch (error) {
  console.error(`timeline test failed: ${error.stack || error}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
