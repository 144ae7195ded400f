/**
 * What the chat page (`/`) of a real `runplane serve` (HTTP socket, SQLite file, the demo agent
 * streaming with no pause) keeps in memory over a long conversation, in headless Chromium: the
 * `agent.*` events of the runs that have not ended (a resumed run rebuilds its reply from them,
 * README "Cluster"), none of those that ended, live or rebuilt from the history by a reload.
 * Counted through the DevTools protocol (`Runtime.queryObjects` after a collection), so the page
 * exposes nothing for it.
 */
import type { CDPSession, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { skipBrowser, usePageServer } from './browser.js';

// No pause between words: the runs end without moving the clock, which also never refills the
// owner's request budget, so the rate limit is off.
const clock = new SimulatedClock();
const pages = usePageServer(clock, { chunkDelayMs: 0, rateLimitPerSecond: 0 });

/** How many runs the conversation holds. */
const runCount = 40;

/**
 * How many events as the API sends them (`{seq, run_id, type, payload}`, parsed from JSON) the
 * page's heap holds now, after a full collection: only what the page still refers to counts.
 */
async function retainedEvents(cdp: CDPSession): Promise<number> {
  await cdp.send('HeapProfiler.collectGarbage');
  const group = 'retained-events';
  try {
    const proto = await cdp.send('Runtime.evaluate', {
      expression: 'Object.prototype',
      objectGroup: group,
    });
    const { objects } = await cdp.send('Runtime.queryObjects', {
      prototypeObjectId: proto.result.objectId ?? '',
      objectGroup: group,
    });
    const { result } = await cdp.send('Runtime.callFunctionOn', {
      objectId: objects.objectId ?? '',
      returnByValue: true,
      functionDeclaration: `function () {
        const own = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
        return this.filter((o) => ['seq', 'run_id', 'type', 'payload'].every((k) => own(o, k))).length;
      }`,
    });
    return result.value as number;
  } finally {
    // The array of every object holds them all: release it before the next count.
    await cdp.send('Runtime.releaseObjectGroup', { objectGroup: group });
  }
}

const ended = (page: Page, count: number) =>
  page.waitForFunction(
    (n) => document.querySelectorAll('article.turn[data-outcome]').length >= n,
    count,
  );

describe.skipIf(skipBrowser)('the chat page over a long conversation', () => {
  it("keeps the agent events of the running run only, none of the ended runs'", async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${pages.server.url}/#token=${pages.server.devToken}`);
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    const sessionId = (await page.locator('#session').textContent()) ?? '';
    const cdp = await page.context().newCDPSession(page);
    const post = async (text: string) => {
      const response = await fetch(
        `${pages.server.url}/api/sessions/${encodeURIComponent(sessionId)}/events`,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${pages.server.devToken}`,
            'content-type': 'application/json',
          },
          body: JSON.stringify({ events: [{ type: 'user.message', payload: { text } }] }),
        },
      );
      expect(response.status).toBe(200);
    };

    // Long replies streamed word by word, and a calculator call every fifth run.
    for (let i = 1; i <= runCount; i++) {
      await post(i % 5 === 0 ? `what is ${i} * 7?` : `hello ${i}`);
      await ended(page, i);
    }
    const key = { ownerId: 'dev', sessionId };
    const logged = pages.server.runtime.eventLog.lastSeq({}, key);
    expect(logged).toBeGreaterThan(runCount * 50); // a long conversation: thousands of events
    expect(await page.locator('article.turn[data-outcome="completed"]').count()).toBe(runCount);
    expect(await retainedEvents(cdp)).toBe(0);

    // A run that has not ended keeps its agent events, for a `run.resumed` to rebuild its reply.
    const append = (type: string, payload: Record<string, unknown>) =>
      pages.server.runtime.eventLog.append({}, key, {
        runId: 'run-open',
        type,
        payload,
        at: clock.now(),
      });
    append('user.message', { run_id: 'run-open', text: 'still going', strategy: 'enqueue' });
    append('session.run_started', { run_id: 'run-open' });
    for (const delta of ['Still ', 'going ', 'on']) {
      append('agent.message_delta', { message_id: 'm-open', step: 1, delta });
    }
    const open = page.locator('article.turn[data-run-id="run-open"] .reply');
    await page.waitForFunction(
      () =>
        document.querySelector('article.turn[data-run-id="run-open"] .reply')?.textContent ===
        'Still going on',
    );
    expect(await retainedEvents(cdp)).toBe(3);

    // Rebuilt from the history, the same: the running run's three, none of the rest.
    await page.reload();
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    expect(await open.textContent()).toBe('Still going on');
    expect(await page.locator('article.turn[data-outcome]').count()).toBe(runCount);
    expect(await retainedEvents(cdp)).toBe(3);

    // Its end drops them.
    append('run.completed', { reason: 'completed' });
    await ended(page, runCount + 1);
    expect(await retainedEvents(cdp)).toBe(0);
    await page.close();
  }, 120_000);
});
