/**
 * The chat page in headless Chromium (playwright-core with Debian's /usr/bin/chromium; no
 * browser is ever downloaded): send, see streamed text, cancel a queued message, stop a
 * running one, preempt, and reload: the page rebuilds from the log and the stream resumes
 * from its cursor. The server runs the default demo agent on a simulated clock; time moves
 * only once the page has shown every event logged so far, so nothing depends on wall time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { SimulatedClock } from 'xstate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planDemoReply } from '../../src/server/demo-agent.js';
import { startServer, type RunningServer } from '../../src/server/serve.js';
import {
  advanceUntil as advanceWith,
  launchChromium,
  skipBrowser as skip,
} from '../pages/browser.js';

const chunkDelayMs = 60;
let server: RunningServer;
let browser: Browser;
let dir: string;
const clock = new SimulatedClock();

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'runplane-e2e-'));
  server = await startServer({
    port: 0,
    dbPath: join(dir, 'runplane.db'),
    clock,
    chunkDelayMs,
    log: () => undefined,
  });
  browser = await launchChromium();
});

afterAll(async () => {
  if (skip) return;
  await browser?.close();
  await server?.shutdown({ graceMs: 0 });
  rmSync(dir, { recursive: true, force: true });
});

/** The page's cursor (the last seq it applied). */
const cursorOf = async (page: Page) => Number(await page.locator('#cursor').textContent());

const at = {
  get server() {
    return server;
  },
  clock,
  stepMs: chunkDelayMs,
};
const advanceUntil = (page: Page, sessionId: string, done: () => Promise<boolean>) =>
  advanceWith(page, at, sessionId, done);
const lastSeq = (sessionId: string) =>
  server.runtime.eventLog.lastSeq({}, { ownerId: 'dev', sessionId });

const turn = (page: Page, index: number) => page.locator('article.turn').nth(index);
const statusOf = (page: Page, index: number) => turn(page, index).getAttribute('data-status');
const replyOf = async (page: Page, index: number) =>
  (await turn(page, index).locator('.reply .text').allTextContents()).join('');

async function send(page: Page, text: string) {
  await page.fill('#text', text);
  await page.press('#text', 'Enter');
}

describe.skipIf(skip)('chat page in headless Chromium', () => {
  it('sends, streams, cancels a queued message, stops, preempts, and resumes after a reload', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    const streams: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/events/stream')) streams.push(request.url());
    });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));

    await page.goto(`${server.url}/#token=${server.devToken}`);
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    const sessionId = (await page.locator('#session').textContent()) ?? '';
    expect(sessionId).toMatch(/^[\w-]{21}$/);
    expect(page.url()).toBe(`${server.url}/`); // the token left the address bar

    // Send, and watch the reply stream in.
    await send(page, 'hello there');
    await expect.poll(() => page.locator('article.turn').count()).toBe(1);
    await advanceUntil(page, sessionId, async () =>
      (await replyOf(page, 0)).includes('This reply'),
    );
    expect(await statusOf(page, 0)).toBe('running');
    expect(await replyOf(page, 0)).toMatch(/^You said: "hello there"\. This reply/);

    // A second message waits in the queue; cancel it.
    await send(page, 'second message');
    await advanceUntil(page, sessionId, async () => (await statusOf(page, 1)) === 'queued');
    await turn(page, 1).getByTestId('cancel').click();
    await advanceUntil(page, sessionId, async () => (await statusOf(page, 1)) === 'cancelled');
    expect(await statusOf(page, 0)).toBe('running');

    // Stop the running one: only it stops; its partial reply stays.
    const partial = await replyOf(page, 0);
    await turn(page, 0).getByTestId('stop').click();
    await advanceUntil(page, sessionId, async () => (await statusOf(page, 0)) === 'cancelled');
    expect(await replyOf(page, 0)).toBe(partial);
    expect(await turn(page, 0).getByTestId('stop').count()).toBe(0);

    // Preempt: the next message cancels the running one and starts.
    await send(page, 'third');
    await advanceUntil(page, sessionId, async () => (await replyOf(page, 2)).includes('said'));
    await page.check('#preempt');
    await send(page, 'fourth, urgent');
    // The plain reply has no safe point: the preempt escalates after the session's grace (5 s).
    await advanceUntil(page, sessionId, async () => (await statusOf(page, 3)) === 'running');
    expect(await statusOf(page, 2)).toBe('cancelled');
    await page.uncheck('#preempt');
    await advanceUntil(page, sessionId, async () =>
      (await replyOf(page, 3)).includes('This reply'),
    );

    // Reload mid-stream: the page rebuilds from the log and resumes from its cursor.
    const before = { cursor: await cursorOf(page), reply: await replyOf(page, 3), turns: 4 };
    expect(before.cursor).toBe(lastSeq(sessionId));
    streams.length = 0;
    await page.reload();
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    expect(await page.locator('article.turn').count()).toBe(before.turns);
    expect(await cursorOf(page)).toBe(before.cursor);
    expect(await replyOf(page, 3)).toBe(before.reply);
    expect(streams).toHaveLength(1);
    expect(new URL(streams[0] ?? '').searchParams.get('after')).toBe(String(before.cursor));
    await advanceUntil(page, sessionId, async () => (await statusOf(page, 3)) === 'completed');
    // Every word once, in order: nothing lost or repeated across the reload.
    const full = planDemoReply([{ role: 'user', content: 'fourth, urgent' }]).words.join('');
    expect(await replyOf(page, 3)).toBe(full);
    expect(await statusOf(page, 0)).toBe('cancelled');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000); // a dozen browser steps on a shared 2-core host
});
