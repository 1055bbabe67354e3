// Drives the inspector's run actions in the distribution's Chromium: `node actions.mjs CHROMIUM
// BASE_URL WAITING_RUN FINISHED_RUN SCREENSHOT_DIR`. Cancels WAITING_RUN from its page and waits
// for it to show `cancelled` without a reload; opens FINISHED_RUN, opens the moment of the step
// where it waited, forks it from there and waits for the new run's page to show it running.
// Prints one JSON line of what it saw; any failure exits 1 with the reason.
import { chromium } from "playwright-core";

const [chromiumPath, base, waiting, finished, screenshots] = process.argv.slice(2);
const seen = {};
const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));

  await page.goto(`${base}runs/${encodeURIComponent(waiting)}`, { waitUntil: "domcontentloaded" });
  const cancel = page.locator('button[data-action="cancel"]');
  await cancel.waitFor({ timeout: 30000 });
  await cancel.click();
  await page.locator("#action-message").filter({ hasText: "cancel" }).waitFor({ timeout: 30000 });
  await page.locator('#run-header [data-status="cancelled"]').waitFor({ timeout: 60000 });
  seen.cancelled_inbox = await page.locator("#inbox td.outcome").first().textContent();
  await page.screenshot({ path: `${screenshots}/run-cancelled.png`, fullPage: true });

  await page.goto(`${base}runs/${encodeURIComponent(finished)}`, { waitUntil: "domcontentloaded" });
  await page.locator('#run-header [data-status="finished"]').waitFor({ timeout: 30000 });
  // The step before the last: the run was waiting for guidance after it.
  const steps = page.locator("#steps tr.step");
  await steps.first().waitFor({ timeout: 30000 });
  await steps.nth(1).click();
  const fork = page.locator('button[data-action="fork"]');
  await fork.waitFor({ timeout: 30000 });
  await fork.click();
  await page.waitForURL((url) => url.pathname.startsWith("/runs/fork-"), { timeout: 60000 });
  seen.forked = decodeURIComponent(new URL(page.url()).pathname.slice("/runs/".length));
  await page.locator('#run-header [data-status="running"]').waitFor({ timeout: 60000 });
  await page.locator('form[data-event="captain_guidance"]').waitFor({ timeout: 60000 });
  await page.screenshot({ path: `${screenshots}/run-forked.png`, fullPage: true });
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(String(error && error.stack || error));
  process.exitCode = 1;
} finally {
  await browser.close();
}
