/**
 * What one redraw of the timeline's last-minute view does in headless Chromium, whatever the page
 * kept before the window (README "Live timeline": the page keeps everything since it connected,
 * so "All" can show it; the last minute should only cost what it shows).
 *
 * Two recorded traces differ only in how many runs ended long before their last minute (40 or
 * 400); the JavaScript function calls one redraw makes are counted with the DevTools protocol's
 * precise coverage (call counts), which the page knows nothing about. No timing is measured.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderTimelinePage } from '../../src/index.js';
import { launchChromium, skipBrowser as skip } from '../pages/browser.js';
import { createRecordedRuntime, steppingAgent } from './timeline-helpers.js';

/** The time (ms) the recent runs start at in every trace: the same window, the same axis. */
const recentAt = 10_000_000;

/** A session's trace: `old` runs one after the other from t = 0, then two at `recentAt`. */
async function recordTrace(old: number): Promise<string> {
  const { runtime, clock, advance, trace } = createRecordedRuntime();
  const runOne = async (runId: string) => {
    const run = runtime.prepare({
      ownerId: 'alice',
      sessionId: 'chat',
      agent: steppingAgent(2, 100),
      input: runId,
      runId,
    });
    run.start();
    await advance(300);
    expect((await run.termination).status).toBe('COMPLETED');
  };
  for (let i = 0; i < old; i++) await runOne(`old-${i}`);
  clock.set(recentAt);
  await runOne('recent-1');
  await runOne('recent-2');
  await runtime.shutdown({ graceMs: 0 });
  return trace();
}

/** Opens a page with the trace embedded, at an address of its own (its scripts' URL). */
async function openTrace(browser: Browser, trace: string, name: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  const url = `http://timeline.test/${name}`;
  await page.route(url, (route) =>
    route.fulfill({ contentType: 'text/html', body: renderTimelinePage({ trace }) }),
  );
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  return page;
}

/**
 * Redraws the last-minute view once (a click on "Last minute" redraws at once) and counts the
 * calls of the page's own functions that redraw made.
 */
async function callsOfOneRedraw(page: Page): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await cdp.send('Profiler.takePreciseCoverage'); // resets the counts
  await page.click('#view-recent');
  const { result } = await cdp.send('Profiler.takePreciseCoverage');
  await cdp.send('Profiler.stopPreciseCoverage');
  await cdp.detach();
  return result
    .filter((script) => script.url === page.url())
    .flatMap((script) => script.functions)
    .reduce((sum, fn) => sum + fn.ranges[0]!.count, 0);
}

/** What the view shows: each lane's id, states and markers, and the hidden-runs note. */
function shown(page: Page) {
  return page.evaluate(() => ({
    lanes: Array.from(document.querySelectorAll<HTMLElement>('.lane')).map((lane) => [
      lane.dataset.laneId,
      Array.from(lane.querySelectorAll<HTMLElement>('.seg')).map((seg) => seg.dataset.state),
    ]),
    note: document.getElementById('hidden-note')?.textContent ?? null,
  }));
}

describe.skipIf(skip)('a redraw of the last minute in headless Chromium', () => {
  let browser: Browser;
  const traces: Record<number, string> = {};

  beforeAll(async () => {
    browser = await launchChromium();
    for (const old of [40, 400]) traces[old] = await recordTrace(old);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  it('makes as many calls after 400 earlier runs as after 40, and shows the same lanes', async () => {
    const seen: Record<number, { calls: number; view: Awaited<ReturnType<typeof shown>> }> = {};
    for (const old of [40, 400]) {
      const page = await openTrace(browser, traces[old]!, `old-${old}`);
      await page.click('#view-recent'); // the first redraw of the view, outside the count
      const calls = await callsOfOneRedraw(page);
      expect(await page.getAttribute('body', 'data-view')).toBe('recent');
      seen[old] = { calls, view: await shown(page) };
      // "All" still draws every run the page keeps.
      await page.click('#view-all');
      expect(await page.locator('.run-lane').count()).toBe(old + 2);
      await page.close();
    }
    for (const old of [40, 400]) {
      expect(seen[old]!.view).toEqual({
        lanes: [
          ['alice/chat', ['idle', 'active', 'idle', 'active', 'idle']],
          ['recent-1', ['CREATED', 'RUNNING', 'COMPLETED']],
          ['recent-2', ['CREATED', 'RUNNING', 'COMPLETED']],
        ],
        note: `${old} runs ended before this view; press “All” to see them.`,
      });
    }
    expect(seen[400]!.calls).toBeGreaterThan(0);
    expect(seen[400]!.calls).toBe(seen[40]!.calls);
  }, 60_000);
});
