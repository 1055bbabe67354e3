// Drives the web inspector in the distribution's Chromium (Playwright's core, no browser of its
// own): `node inspector.mjs CHROMIUM BASE_URL RUN_ID SCREENSHOT_DIR`. Opens the run list, opens
// the run, checks its active state is highlighted, sends `captain_guidance` from the page and
// waits for the run to finish without a reload; a screenshot of each page. Prints one JSON line
// of what it saw; any failure exits 1 with the reason.
import { chromium } from "playwright-core";

const [chromiumPath, base, run, screenshots] = process.argv.slice(2);
const seen = { navigations: 0 };
const browser = await chromium.launch({
  executablePath: chromiumPath,
  // As root (CI) Chromium's own sandbox cannot start; the test machine is the sandbox.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()}`);
  });

  await page.goto(base, { waitUntil: "domcontentloaded" });
  const row = page.locator(`tr[data-run="${run}"]`);
  await row.waitFor({ timeout: 30000 });
  seen.listed_status = await row.locator(".status").textContent();
  seen.listed_states = await row.locator(".states").textContent();
  await page.screenshot({ path: `${screenshots}/runs.png`, fullPage: true });

  await row.locator("a.run-link").click();
  await page.waitForURL((url) => url.pathname.startsWith("/runs/"));
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) seen.navigations += 1;
  });
  await page.locator('#diagram svg [data-state="monitoring"]').waitFor({ timeout: 30000 });
  await page.waitForFunction(() => {
    const node = document.querySelector('#diagram svg g.state[data-state="monitoring"]');
    return node && node.classList.contains("active");
  }, null, { timeout: 30000 });
  seen.active = await page.$$eval("#diagram svg g.state.active", (nodes) => nodes.map((node) => node.dataset.state));
  await page.screenshot({ path: `${screenshots}/run-waiting.png`, fullPage: true });

  const form = page.locator('form[data-event="captain_guidance"]');
  await form.waitFor({ timeout: 30000 });
  const data = form.locator("textarea");
  if (await data.count()) await data.fill('{"say": "take the other route"}');
  await form.locator("button").click();
  await form.locator(".message").filter({ hasText: "Queued as inbox entry" }).waitFor({ timeout: 30000 });
  seen.queued = await form.locator(".message").textContent();

  // The run's holder applies the event; the page hears of it over server-sent events.
  await page.locator('#run-header [data-status="finished"]').waitFor({ timeout: 60000 });
  seen.final_states = await page.$$eval("#diagram svg g.state.active", (nodes) => nodes.map((node) => node.dataset.state));
  seen.inbox = await page.locator("#inbox td.outcome").first().textContent();
  seen.steps_shown = await page.locator("#steps tr.step").count();
  await page.screenshot({ path: `${screenshots}/run-finished.png`, fullPage: true });

  // What the steps did: the directive that asked for the captain, in its step's row.
  seen.directives = await page.$$eval("#steps td.actions .directive", (nodes) => nodes.map((node) => node.dataset.directive));
  // The logs, filtered by level and by tag.
  await page.locator("#logs tr").first().waitFor({ timeout: 30000 });
  seen.log_lines = await page.locator("#logs tr").count();
  await page.selectOption("#log-level", "error");
  seen.error_levels = await page.$$eval("#logs tr", (rows) => rows.map((row) => row.children[1].textContent));
  await page.selectOption("#log-level", "");
  await page.fill("#log-tags", "ittw_monitoring");
  seen.monitoring_tags = await page.$$eval("#logs tr", (rows) => rows.map((row) => row.children[2].textContent));
  await page.fill("#log-tags", "");

  // A step's moment: its states and its context.
  await page.locator("#steps tr.step").last().click();
  await page.locator(".moment").waitFor({ timeout: 30000 });
  seen.moment_configuration = await page.locator("#configuration").textContent();
  await page.screenshot({ path: `${screenshots}/run-step.png`, fullPage: true });

  // Nothing drawn as a stray `null` or `[object …]`.
  seen.stray_text = await page.evaluate(() => /\[object |^null$/m.test(document.body.innerText));
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`inspector test failed: ${error.stack || error}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
