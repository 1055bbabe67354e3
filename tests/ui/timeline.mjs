// Opens a run's page in the distribution's Chromium and reads its timeline, then follows the
// link to its protocol's statistics: `node timeline.mjs CHROMIUM RUN_URL SCREENSHOT_DIR`. Prints
// one JSON line: each effect attempt's bar (effect, attempt, timeout) in the order drawn, the
// states with visits, and the statistics page's retry line and outcome bars; a screenshot of
// each page.
import { chromium } from "playwright-core";

const [chromiumPath, url, screenshots] = process.argv.slice(2);
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
  await page.screenshot({ path: `${screenshots}/run-timeline.png`, fullPage: true });
  await page.locator("a.stats-link").click();
  await page.locator(".chart-outcomes rect").first().waitFor({ state: "attached", timeout: 30000 });
  const retries = await page.locator("#retry-success").textContent();
  const outcomes = await page.$$eval(".chart-outcomes rect", (bars) => bars.map((bar) => ({
    action: bar.dataset.item, part: bar.dataset.part, value: Number(bar.dataset.value),
  })));
  await page.screenshot({ path: `${screenshots}/stats.png`, fullPage: true });
  console.log(JSON.stringify({ attempts, states, retries, outcomes }));
} catch (error) {
  console.error(`timeline test failed: ${error.stack || error}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
