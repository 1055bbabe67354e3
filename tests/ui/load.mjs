// Times the inspector's two pages in the distribution's Chromium, for benches/ui_load.py:
// `node load.mjs CHROMIUM BASE_URL RUN_ID ROWS ROUNDS`. Each round opens the run list until its
// ROWS rows are drawn, then the run until its statechart and steps are; one JSON line of times.
import { chromium } from "playwright-core";
const [executablePath, base, run, rows, rounds] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const list = [], one = [];
for (let round = 0; round < Number(rounds); round += 1) {
  let started = Date.now();
  await page.goto(base, { waitUntil: "commit" });
  await page.waitForFunction((count) => document.querySelectorAll("tr[data-run]").length >= count, Number(rows), { timeout: 60000, polling: 5 });
  list.push(Date.now() - started);
  started = Date.now();
  await page.goto(`${base}runs/${encodeURIComponent(run)}`, { waitUntil: "commit" });
  await page.waitForFunction(() => document.querySelector("#diagram svg") && document.querySelectorAll("#steps tr.step").length > 0, null, { timeout: 60000, polling: 5 });
  one.push(Date.now() - started);
}
console.log(JSON.stringify({ list, one }));
await browser.close();
