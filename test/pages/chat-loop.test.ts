/**
 * The chat page's loop sessions (README "Loop sessions: a TurnLoop over HTTP") on a real
 * `runplane serve` (HTTP socket, SQLite file, the demo agent on a simulated clock) in headless
 * Chromium, as a person sees them: "Loop mode" chosen with the keyboard, each message waiting,
 * queued for the next turn or in the turn that consumed it, a turn grouping its messages, "Send
 * now (preempt)" cutting the running turn, a reload rebuilding it all, 360 px, dark mode, and no
 * serious accessibility violation. Time moves only once the page has shown every event logged.
 */
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import {
  advanceUntil,
  axeViolations,
  blocking,
  outsideViewport,
  shoot,
  skipBrowser,
  useChatPageServer,
} from './browser.js';

const { clock, pages, at, open, newSession, tabOn } = useChatPageServer();

/** The loop session the first test builds; the others reopen it. */
let loopSession = '';

/** Types a message; `now` sends it with "Send now (preempt)", else with Enter. */
async function send(page: Page, text: string, now = false) {
  await page.focus('#text');
  await page.keyboard.type(text);
  if (!now) {
    await page.keyboard.press('Enter');
    return;
  }
  await page.focus('#send-now');
  await page.keyboard.press('Enter');
}

/** What a person reads of each message and turn, in page order. */
function readLoop(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll('#log .turn-head, #log .loop-item')).map((node) =>
      node.classList.contains('turn-head')
        ? `${node.textContent ?? ''} [${(node.closest('article') as HTMLElement).dataset.outcome ?? (node.closest('article') as HTMLElement).dataset.status ?? ''}]`
        : `  ${node.querySelector('.item-number')?.textContent ?? ''}: ${node.querySelector('.item-state')?.textContent ?? ''}`,
    ),
  );
}

const turnsEnded = (page: Page, count: number) => async () =>
  (await page.locator('article.turn[data-outcome]').count()) >= count;

describe.skipIf(skipBrowser)('loop sessions in the chat page', () => {
  it('groups a turn’s messages, shows what is queued, and preempts with "Send now"', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 900 } });
    await open(page);
    // Loop mode with the keyboard; its one line of explanation shows while it is on.
    expect(await page.locator('#mode-hint').isVisible()).toBe(false);
    await page.focus('#loop-mode');
    await page.keyboard.press('Space');
    expect(await page.locator('#mode-hint').textContent()).toContain('the next turn answers');
    expect(await page.locator('#mode-hint').isVisible()).toBe(true);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('new-session');
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      () => document.getElementById('session-mode')?.textContent === 'loop',
    );
    loopSession = (await page.locator('#session').textContent()) ?? '';
    // An empty session says what to try; the first message takes its place.
    expect(await page.getByTestId('empty-hint').textContent()).toContain('what time is it?');
    expect(await page.locator('#send-now').isVisible()).toBe(true);
    expect(await page.locator('#preempt').isVisible()).toBe(false);

    await send(page, 'tell me a story');
    await page.locator('article.turn[data-status="running"]').waitFor();
    // The clock stands still: turn 1 runs while two more messages come in.
    await send(page, 'and then?');
    await send(page, 'what time is it?');
    await page.locator('.loop-item').nth(2).waitFor();
    expect(await readLoop(page)).toEqual([
      'Turn 1 · answers message 1 [running]',
      '  Message 1: turn 1',
      '  Message 2: queued for next turn',
      '  Message 3: queued for next turn',
    ]);
    await shoot(page, 'loop-queued-1280-light');

    await send(page, 'urgent: what is 6*7?', true);
    await page.locator('.loop-item').nth(3).waitFor();
    const first = page.locator('article.turn').first();
    expect(await first.locator('.pending').textContent()).toBe('preempting…');
    expect(await page.locator('.loop-item').nth(3).locator('.item-preempt').textContent()).toBe(
      'sent now',
    );
    await advanceUntil(page, at, loopSession, turnsEnded(page, 2));
    const seen = await readLoop(page);
    expect(seen).toEqual([
      'Turn 1 · answers message 1 [replaced]',
      '  Message 1: turn 1',
      'Turn 2 · answers messages 2, 3 and 4 [completed]',
      '  Message 2: turn 2',
      '  Message 3: turn 2',
      '  Message 4: turn 2',
    ]);
    expect(await first.locator('.reason').textContent()).toContain('A newer message took over');
    expect(await page.getByTestId('empty-hint').count()).toBe(0);
    // A turn's bar runs from its head down past its pill and reply.
    const bar = await page.$$eval('article.turn', (turns) =>
      turns.map((turn) => {
        const box = turn.getBoundingClientRect();
        const last = turn.querySelector('.reply')!.getBoundingClientRect();
        const pill = turn.querySelector('.pill')!.getBoundingClientRect();
        return (
          getComputedStyle(turn).borderLeftWidth === '3px' &&
          pill.bottom <= box.bottom &&
          last.bottom <= box.bottom
        );
      }),
    );
    expect(bar).toEqual([true, true]);
    expect(blocking(await axeViolations(page))).toEqual([]);

    // A reload rebuilds the same view from the log.
    await page.reload();
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    expect(await readLoop(page)).toEqual(seen);
    expect(await page.locator('#session-mode').textContent()).toBe('loop');
    await page.close();
  });

  it('shows a turn cut by a shutdown, its messages waiting, then the resumed turn taking them', async () => {
    const created = await fetch(`${pages.server.url}/api/sessions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${pages.server.devToken}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ mode: 'loop' }),
    });
    const sessionId = ((await created.json()) as { session_id: string }).session_id;
    // The log as a SIGTERM and a restart write it (README "Loop sessions").
    const append = (runId: string | undefined, type: string, payload: Record<string, unknown>) =>
      pages.server.runtime.eventLog.append(
        {},
        { ownerId: 'dev', sessionId },
        { runId, type, payload, at: clock.now() },
      );
    append(undefined, 'user.message', { item_id: 'i1', text: 'tell me a story', preempt: false });
    append('r1', 'session.run_started', { run_id: 'r1', item_ids: ['i1'] });
    append(undefined, 'user.message', { item_id: 'i2', text: 'and then?', preempt: false });
    append('r1', 'run.cancelled', {
      cause: 'cancel',
      escalated: false,
      reason: 'turn loop stopped: shutdown',
      initiator: 'shutdown',
    });
    append(undefined, 'session.loop_stopped', {
      cause: 'shutdown',
      interrupted_item_ids: ['i1'],
      unhandled_item_ids: ['i2'],
      checkpoint: 'saved',
    });
    const page = await tabOn(sessionId, 1280, 'light');
    await open(page);
    await page.locator('article.turn[data-outcome]').waitFor();
    expect(await readLoop(page)).toEqual([
      'Turn 1 · answers message 1 [shutdown]',
      '  Message 1: waiting for a turn (server stopped)',
      '  Message 2: waiting for a turn (server stopped)',
    ]);
    // Live, as the restarted server resumes the cut turn with both messages.
    append('r2', 'session.run_started', { run_id: 'r2', item_ids: ['i1', 'i2'] });
    append('r2', 'run.completed', { reason: 'completed' });
    await page.locator('article.turn[data-outcome="completed"]').waitFor();
    expect(await readLoop(page)).toEqual([
      'Turn 1 · answers message 1 · message 1 continued in turn 2 [shutdown]',
      'Turn 2 · answers messages 1 and 2 [completed]',
      '  Message 1: turn 2',
      '  Message 2: turn 2',
    ]);
    await page.close();
  });

  it('lists each session with its mode', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 800 } });
    await open(page);
    const plain = await newSession(page); // "Loop mode" is off in a fresh tab: a plain session
    expect(await page.locator('#session-mode').textContent()).toBe('chat');
    await page.focus('#sessions summary');
    await page.keyboard.press('Enter');
    const entry = (id: string) => page.locator(`#sessions button[data-session-id="${id}"]`);
    await entry(loopSession).waitFor();
    expect(await entry(loopSession).locator('.session-mode').textContent()).toBe('loop');
    expect(await entry(plain).locator('.session-mode').textContent()).toBe('chat');
    expect(blocking(await axeViolations(page))).toEqual([]);
    await shoot(page, 'sessions-1280-light');
    await page.close();
  });

  it('fits 360 px in light and dark, every control in view, no serious violation', async () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      for (const width of [1280, 360]) {
        const page = await tabOn(loopSession, width, colorScheme);
        await open(page);
        await page.locator('.turn-head').nth(1).waitFor();
        expect(await outsideViewport(page), `${colorScheme} ${width}`).toEqual([]);
        expect(blocking(await axeViolations(page)), `${colorScheme} ${width}`).toEqual([]);
        for (const id of ['new-session', 'loop-mode', 'send', 'send-now']) {
          const box = (await page.locator(`#${id}`).boundingBox())!;
          expect(box.x + box.width, `${id} at ${width}`).toBeLessThanOrEqual(width);
        }
        await shoot(page, `loop-${width}-${colorScheme}`);
        await page.close();
      }
    }
  }, 90_000);
});
