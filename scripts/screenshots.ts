/**
 * `npm run screenshots`: the chat page's screenshots in docs/screenshots (README "Chat page"),
 * taken from a real `runplane serve` (SQLite file in a temporary folder, the demo agent on a
 * simulated clock) in Debian's /usr/bin/chromium through playwright-core.
 *
 * @remarks Writes `chat-*` (a plain session with every kind of end), `chat-approval-*` (a tool
 * call waiting for approval), `loop-*` (a loop session: a turn preempted by "Send now", the
 * next turn answering three messages), `loop-queued-*` (messages queued for the next turn) and
 * `sessions-*` (the sessions list with each session's mode), at 1280 and 360 px in light and
 * dark. The clock moves only once the page shows every event logged so far, so each run
 * draws the same states. The live timeline's screenshots (`inspect-*`) come from
 * test/pages/inspect-page.test.ts (test-artifacts/pages), copied by hand.
 *
 * Usage: `npm run screenshots [-- --out <folder>]` (default docs/screenshots).
 *
 * @module
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { SimulatedClock } from 'xstate';
import { startServer } from '../src/server/serve.js';
import { advanceUntil, launchChromium, stopServer } from '../test/pages/page-driver.js';

const outIndex = process.argv.indexOf('--out');
const out = outIndex === -1 ? join('docs', 'screenshots') : (process.argv[outIndex + 1] ?? '');
const stepMs = 60;
const schemes = ['light', 'dark'] as const;
const widths = [1280, 360] as const;

const clock = new SimulatedClock();
// A fixed date, so the sessions list shows a plausible time and every run draws the same.
clock.set(Date.UTC(2026, 11, 2, 9, 30));
const dir = mkdtempSync(join(tmpdir(), 'runplane-screenshots-'));
const server = await startServer({
  port: 0,
  dbPath: join(dir, 'runplane.db'),
  clock,
  chunkDelayMs: stepMs,
  lingerMs: 0,
  log: () => undefined,
});
const at = { server, clock, stepMs };
const token = server.devToken ?? '';

/** Calls the API with the dev token. */
async function api(method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok)
    throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

/** Creates a session (`{ mode: 'loop' }` for a loop session); answers its id. */
async function createSession(body: Record<string, unknown> = {}): Promise<string> {
  return ((await api('POST', '/api/sessions', body)) as { session_id: string }).session_id;
}

/** Sends one event; answers its result (`run_id` for a message in a plain session). */
async function post(sessionId: string, type: string, payload: Record<string, unknown>) {
  const answer = (await api('POST', `/api/sessions/${sessionId}/events`, {
    events: [{ type, payload }],
  })) as { results: Array<{ result: string; run_id?: string }> };
  const result = answer.results[0];
  if (result === undefined || (type === 'user.message' && result.result !== 'accepted')) {
    throw new Error(`${type} was not accepted: ${JSON.stringify(result)}`);
  }
  return result;
}

/** A tab on session `sessionId`, following it live. */
async function open(
  browser: Browser,
  sessionId: string,
  width: number,
  colorScheme: 'light' | 'dark',
): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 800 }, colorScheme });
  await page.addInitScript((id) => localStorage.setItem('runplane.session', id), sessionId);
  await page.goto(`${server.url}/#token=${token}`);
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
  return page;
}

const ended = (page: Page, count: number) => async () =>
  (await page.locator('article.turn[data-outcome]').count()) >= count;
const replied = (page: Page, runId: string) => async () =>
  ((await page.locator(`article[data-run-id="${runId}"] .reply`).textContent()) ?? '').length > 40;

/** A plain session with a reply stopped, one preempted, one cancelled while queued, one done. */
async function plainSession(browser: Browser): Promise<string> {
  const id = await createSession();
  const page = await open(browser, id, 1280, 'light');
  const story = await post(id, 'user.message', { text: 'tell me a story' });
  await advanceUntil(page, at, id, replied(page, story.run_id ?? ''));
  await post(id, 'user.interrupt', { run_id: story.run_id });
  await advanceUntil(page, at, id, ended(page, 1));
  const long = await post(id, 'user.message', { text: 'a long answer please' });
  await advanceUntil(page, at, id, replied(page, long.run_id ?? ''));
  const waits = await post(id, 'user.message', { text: 'and this one waits' });
  await post(id, 'user.interrupt', { run_id: waits.run_id });
  await post(id, 'user.message', { text: 'urgent: stop that', strategy: 'preempt' });
  await advanceUntil(page, at, id, ended(page, 4));
  await page.close();
  return id;
}

/** A message whose tool call waits for approval, shot while it waits. */
async function approvalSession(browser: Browser): Promise<void> {
  const id = await createSession();
  const page = await open(browser, id, 1280, 'light');
  await post(id, 'user.message', { text: 'what time is it?' });
  await advanceUntil(
    page,
    at,
    id,
    async () => (await page.locator('article.turn[data-pending="approval"]').count()) === 1,
  );
  await page.screenshot({ path: join(out, 'chat-approval-1280-light.png') });
  await page.close();
}

/** A loop session: one turn running with two messages queued, then "Send now" preempting it. */
async function loopSession(browser: Browser): Promise<string> {
  const id = await createSession({ mode: 'loop' });
  const page = await open(browser, id, 1280, 'light');
  await post(id, 'user.message', { text: 'tell me a story' });
  await advanceUntil(page, at, id, async () => {
    const reply = await page.locator('article.turn .reply').first().textContent();
    return (reply ?? '').length > 20;
  });
  await post(id, 'user.message', { text: 'and then?' });
  await post(id, 'user.message', { text: 'keep it short' });
  await page.locator('.loop-item[data-state="queued"]').nth(1).waitFor();
  for (const colorScheme of schemes) {
    for (const width of widths) {
      const view = await open(browser, id, width, colorScheme);
      await view.locator('.loop-item[data-state="queued"]').nth(1).waitFor();
      await view.screenshot({ path: join(out, `loop-queued-${width}-${colorScheme}.png`) });
      await view.close();
    }
  }
  await post(id, 'user.message', { text: 'urgent: what is 6*7?', preempt: true });
  await advanceUntil(page, at, id, ended(page, 2));
  await page.close();
  return id;
}

/** Every width and scheme of session `id`, scrolled to the top, as `<name>-<width>-<scheme>`. */
async function shootAll(browser: Browser, id: string, name: string, wait: string) {
  for (const colorScheme of schemes) {
    for (const width of widths) {
      const page = await open(browser, id, width, colorScheme);
      await page.locator(wait).first().waitFor();
      await page.screenshot({ path: join(out, `${name}-${width}-${colorScheme}.png`) });
      await page.close();
    }
  }
}

/** The sessions list, opened, on the loop session. */
async function sessionsList(browser: Browser, id: string) {
  for (const colorScheme of schemes) {
    for (const width of widths) {
      const page = await open(browser, id, width, colorScheme);
      await page.click('#sessions summary');
      await page.locator('#sessions .session-link').nth(2).waitFor();
      await page.screenshot({ path: join(out, `sessions-${width}-${colorScheme}.png`) });
      await page.close();
    }
  }
}

mkdirSync(out, { recursive: true });
const browser = await launchChromium();
try {
  const plain = await plainSession(browser);
  await shootAll(browser, plain, 'chat', 'article.turn[data-outcome]');
  await approvalSession(browser);
  const loop = await loopSession(browser);
  await shootAll(browser, loop, 'loop', 'article.turn[data-outcome="completed"]');
  await sessionsList(browser, loop);
  console.log(`screenshots written to ${out}`);
} finally {
  await browser.close();
  await stopServer(server, clock);
  rmSync(dir, { recursive: true, force: true });
}
