/**
 * The chat page (`/`) of a real `runplane serve` (HTTP socket, SQLite file, the demo agent on a
 * simulated clock) in headless Chromium, as a person sees it: a pill of its own colour and a
 * reason for every way a run ends, pending notices, tool calls as cards with their approval
 * buttons, the keyboard alone, 360 px, dark mode, a favicon, and no serious accessibility
 * violation. Time moves only once the page has shown every event logged so far.
 */
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import {
  advanceUntil,
  axeViolations,
  blocking,
  outsideViewport,
  recordPolicyViolations,
  shoot,
  skipBrowser,
  useChatPageServer,
} from './browser.js';

const { clock, pages, at, open, newSession, tabOn } = useChatPageServer();

const turn = (page: Page, index: number) => page.locator('article.turn').nth(index);
const attr = (page: Page, index: number, name: string) => turn(page, index).getAttribute(name);
/** The session of the second test, every kind of end in it: the third reopens it. */
let endsSession = '';
const sessionOf = async (page: Page) => (await page.locator('#session').textContent()) ?? '';

/** Types a message and sends it with the keyboard alone. */
async function send(page: Page, text: string) {
  await page.focus('#text');
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

/** Appends a finished run to a session's log, as the runtime or crash recovery writes it. */
function logRun(
  sessionId: string,
  runId: string,
  text: string,
  end: [string, Record<string, unknown>],
) {
  const key = { ownerId: 'dev', sessionId };
  const append = (type: string, payload: Record<string, unknown>) =>
    pages.server.runtime.eventLog.append({}, key, { runId, type, payload, at: clock.now() });
  append('user.message', { run_id: runId, text, strategy: 'enqueue' });
  append('session.run_started', { run_id: runId });
  append('agent.message', { message_id: `m-${runId}`, content: 'A reply that was going well' });
  append(end[0], end[1]);
}

/**
 * Appends to a session's log the events of a run resumed on another instance (failover
 * `resume`), in the order and shapes a cluster logs them (README "Cluster"): the first attempt
 * streams a sentence, reaches its safe point, streams two words more and its holder dies; the
 * next holder logs `run.resumed {safe_point_seq}` and the second attempt, in a message of its
 * own, streams the reply from the safe point on: the two words again, then the rest.
 *
 * @returns `resume()`, which logs the resume and the second attempt to the run's end
 */
function logLostRun(sessionId: string, runId: string) {
  const key = { ownerId: 'dev', sessionId };
  const append = (type: string, payload: Record<string, unknown>) =>
    pages.server.runtime.eventLog.append({}, key, { runId, type, payload, at: clock.now() });
  const stream = (messageId: string, step: number, words: string[]) => {
    for (const delta of words) {
      append('agent.message_delta', { message_id: messageId, step, delta });
    }
  };
  append('user.message', { run_id: runId, text: 'tell me about runplane', strategy: 'enqueue' });
  append('session.run_queued', { run_id: runId });
  append('run.status', { from: 'CREATED', to: 'QUEUED' });
  append('session.run_started', { run_id: runId });
  append('run.status', { from: 'QUEUED', to: 'RUNNING' });
  stream('m-first', 1, ['You ', 'said: ', 'hello. ']);
  const safePointSeq = pages.server.runtime.eventLog.lastSeq({}, key);
  const safePointAt = clock.now();
  stream('m-first', 1, ['This ', 'reply ']); // logged, then the holder died
  return () => {
    append('run.resumed', {
      attempt: 2,
      safe_point: 'afterChatModel',
      safe_point_at: safePointAt,
      safe_point_seq: safePointSeq,
    });
    stream('m-second', 2, ['This ', 'reply ', 'streams.']);
    append('agent.message', { message_id: 'm-second', step: 2, content: 'This reply streams.' });
    append('run.status', { from: 'RUNNING', to: 'COMPLETED' });
    append('run.completed', { reason: 'completed' });
  };
}

describe.skipIf(skipBrowser)('the chat page at /', () => {
  it('shows tool calls as cards, asks for approval, and is operable with the keyboard', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 800 } });
    const failed: string[] = [];
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    await open(page);
    const sessionId = await sessionOf(page);
    // The message box has the focus on load: type and press Enter.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('text');
    await send(page, 'what time is it?');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 0, 'data-pending')) === 'approval',
    );
    const card = turn(page, 0).locator('.tool');
    expect(await card.locator('.tool-name').textContent()).toBe('clock');
    expect(await card.locator('.tool-state').textContent()).toBe('needs your approval');
    expect(await card.locator('.tool-text').textContent()).toBe('no arguments');
    expect(await turn(page, 0).locator('.pending').textContent()).toBe('waiting for your approval');
    await shoot(page, 'chat-approval-1280-light');

    // Tab to "Allow" and press Enter: no mouse needed.
    let focused = '';
    for (let i = 0; i < 20 && focused !== 'allow'; i++) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate(
        () => (document.activeElement as HTMLElement).dataset.testid ?? '',
      );
    }
    expect(focused).toBe('allow');
    await page.keyboard.press('Enter');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 0, 'data-outcome')) === 'completed',
    );
    expect(await card.getAttribute('data-state')).toBe('done');
    expect(await card.locator('.tool-fields dt').allTextContents()).toContain('iso');
    expect(await card.locator('.tool-actions').count()).toBe(0);
    expect(await turn(page, 0).locator('.pill').textContent()).toBe('Completed');
    expect(await turn(page, 0).locator('.pending').isHidden()).toBe(true);
    expect(failed).toEqual([]); // no /favicon.ico 404, nothing else refused
    await page.close();
  });

  it('follows new content while the reader is at the end, and leaves a reader who scrolled up', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 600 } });
    await open(page);
    const sessionId = await newSession(page);
    const questions = ['what is 1 + 1?', 'what is (2 + 3) * 7?', 'what is 6 * 7?'];
    for (const [index, question] of questions.entries()) {
      await send(page, question);
      await advanceUntil(
        page,
        at,
        sessionId,
        async () => (await attr(page, index, 'data-outcome')) === 'completed',
      );
    }
    await send(page, 'what time is it?');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 3, 'data-pending')) === 'approval',
    );
    /** Where an element sits against the conversation's visible box (above the composer). */
    const inView = (selector: string) =>
      page.evaluate((s) => {
        const main = document.querySelector('main')!.getBoundingClientRect();
        const box = document.querySelector(s)!.getBoundingClientRect();
        return box.top >= main.top && box.bottom <= main.bottom;
      }, selector);
    // The conversation is taller than its box, and the approval card is in view.
    expect(await page.evaluate(() => document.querySelector('main')!.scrollTop)).toBeGreaterThan(0);
    expect(await inView('[data-testid="allow"]')).toBe(true);
    // The reader scrolls up to read: the reply that follows "Allow" does not move them.
    await page.evaluate(() => {
      const main = document.querySelector('main')!;
      main.scrollTop = 0;
      main.dispatchEvent(new Event('scroll'));
    });
    await page.evaluate(() =>
      (document.querySelector('[data-testid="allow"]') as HTMLElement).click(),
    );
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 3, 'data-outcome')) === 'completed',
    );
    expect(await page.evaluate(() => document.querySelector('main')!.scrollTop)).toBe(0);
    // Sending pins the view to the end again; the last reply is not under the message box.
    await send(page, 'what is 2 * 21?');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 4, 'data-outcome')) === 'completed',
    );
    expect(await inView('article.turn:last-of-type .pill')).toBe(true);
    expect(await inView('article.turn:last-of-type .reply > :last-child')).toBe(true);
    await page.close();
  });

  it('gives every end its own pill and reason, and shows preempting while it is pending', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 900 } });
    await open(page);
    const sessionId = await newSession(page);
    endsSession = sessionId;

    // Stopped by you, mid-reply.
    await send(page, 'tell me a story');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await turn(page, 0).locator('.text').count()) > 0,
    );
    await turn(page, 0).getByTestId('stop').click();
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 0, 'data-status')) === 'cancelled',
    );
    // Cancelled by you before it started, then preempted by a newer message.
    await send(page, 'a long answer please');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 1, 'data-status')) === 'running',
    );
    await send(page, 'and this one waits');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 2, 'data-status')) === 'queued',
    );
    await turn(page, 2).getByTestId('cancel').press('Enter');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 2, 'data-status')) === 'cancelled',
    );
    await page.check('#preempt');
    await send(page, 'urgent: stop that');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 1, 'data-pending')) === 'preempting',
    );
    expect(await turn(page, 1).locator('.pending').textContent()).toBe('preempting…');
    await shoot(page, 'chat-preempting-1280-light');
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await attr(page, 3, 'data-status')) === 'completed',
    );
    await page.uncheck('#preempt');

    // What the log says of runs that timed out, were stopped by a shutdown, or crashed.
    logRun(sessionId, 'run-timeout', 'slow question', [
      'run.cancelled',
      { cause: 'timeout', escalated: false, reason: 'deadline reached', initiator: 'timeout' },
    ]);
    logRun(sessionId, 'run-shutdown', 'during a deploy', [
      'run.cancelled',
      { cause: 'shutdown', escalated: false, reason: 'shutdown', initiator: 'shutdown' },
    ]);
    logRun(sessionId, 'run-crashed', 'before the crash', [
      'run.failed',
      { error: 'the server process stopped while the run was RUNNING', cause: 'crashed' },
    ]);
    await advanceUntil(
      page,
      at,
      sessionId,
      async () => (await page.locator('article.turn').count()) === 7,
    );

    const seen = await page.$$eval('article.turn', (turns) =>
      turns.map((t) => ({
        outcome: (t as HTMLElement).dataset.outcome,
        pill: t.querySelector('.pill')!.textContent,
        reason: t.querySelector('.reason')!.textContent,
        colour: getComputedStyle(t.querySelector('.pill')!).backgroundColor,
        pending: (t as HTMLElement).dataset.pending ?? null,
      })),
    );
    expect(
      seen.map(({ outcome, pill, reason, pending }) => ({ outcome, pill, reason, pending })),
    ).toEqual([
      {
        outcome: 'stopped',
        pill: 'Stopped by you',
        reason: 'You stopped this reply. It ends where it was cut off.',
        pending: null,
      },
      {
        outcome: 'replaced',
        pill: 'Preempted',
        reason: 'A newer message took over (preempt). The reply ends where it was cut off.',
        pending: null,
      },
      {
        outcome: 'stopped',
        pill: 'Cancelled by you',
        reason: 'You cancelled this message before it started.',
        pending: null,
      },
      { outcome: 'completed', pill: 'Completed', reason: '', pending: null },
      {
        outcome: 'timed-out',
        pill: 'Timed out',
        reason: 'The run reached its time limit. The reply ends where it was cut off.',
        pending: null,
      },
      {
        outcome: 'shutdown',
        pill: 'Stopped by shutdown',
        reason: 'The server was shutting down. The reply ends where it was cut off.',
        pending: null,
      },
      {
        outcome: 'crashed',
        pill: 'Crashed',
        reason: 'The server stopped while this reply was being written.',
        pending: null,
      },
    ]);
    // One colour per kind of end: completed, stopped, replaced, timed out, shutdown, crashed.
    const colours = new Map(seen.map((s) => [s.outcome, s.colour]));
    expect(new Set(colours.values()).size).toBe(colours.size);
    expect(colours.size).toBe(6);
    await shoot(page, 'chat-1280-light');
    await page.close();
  });

  it('shows a run resumed on another instance once, from its safe point, with a note', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 800 } });
    await open(page);
    const sessionId = await newSession(page);
    const resume = logLostRun(sessionId, 'run-resumed');
    const reply = turn(page, 0).locator('.reply');
    await page.waitForFunction(() =>
      document.querySelector('article.turn .reply')?.textContent?.endsWith('This reply '),
    );
    // Live: the words after the safe point go, and the second attempt streams them again.
    resume();
    await page.waitForFunction(
      () => document.querySelector('article.turn')?.getAttribute('data-outcome') === 'completed',
    );
    const whole = 'You said: hello. This reply streams.';
    expect(await reply.textContent()).toBe(whole);
    expect(await reply.locator('.bubble.text').allTextContents()).toEqual([
      'You said: hello. ',
      'This reply streams.',
    ]);
    const note = turn(page, 0).locator('.resumed');
    expect(await note.textContent()).toBe(
      'Resumed on another instance from its last safe point (attempt 2)',
    );
    expect(await note.isVisible()).toBe(true);
    expect(blocking(await axeViolations(page))).toEqual([]);
    // From the history (a reload): the same.
    await page.reload();
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    expect(await reply.textContent()).toBe(whole);
    expect(await note.textContent()).toMatch(/^Resumed on another instance/);
    await page.close();
  });

  it("lists the owner's sessions by their first message, and opens an earlier one with the keyboard", async () => {
    const page = await pages.browser.newPage({ viewport: { width: 360, height: 800 } });
    await open(page);
    const fresh = await newSession(page);
    await page.focus('#sessions summary');
    await page.keyboard.press('Enter');
    const earlier = page.locator(`#sessions button[data-session-id="${endsSession}"]`);
    await earlier.waitFor();
    expect(await earlier.locator('.session-title').textContent()).toBe('tell me a story');
    // The session on screen is marked; the one without a message yet has no title.
    const current = page.locator(`#sessions button[data-session-id="${fresh}"]`);
    expect(await current.getAttribute('aria-current')).toBe('true');
    expect(await current.locator('.session-title').textContent()).toBe('New conversation');
    await earlier.focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      (id) => document.getElementById('session')?.textContent === id,
      endsSession,
    );
    await page.waitForSelector('article.turn');
    expect(await page.locator('article.turn').count()).toBeGreaterThan(2);
    expect(await outsideViewport(page)).toEqual([]);
    await page.close();
  });

  it('fits 360 px, follows the dark scheme, and has no serious accessibility violation', async () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      for (const width of [1280, 360]) {
        // The session id is kept in localStorage: this tab reopens the session with every end.
        const page = await tabOn(endsSession, width, colorScheme);
        const refused = recordPolicyViolations(page);
        await open(page);
        await page.waitForSelector('article.turn');
        // The page runs under its own policy (inline script and style by hash) and breaks none of it.
        expect(refused, `${colorScheme} ${width}`).toEqual([]);
        if (width === 360 && colorScheme === 'dark') {
          // ...while a script that got into the document anyway does not run.
          const ran = await page.evaluate(async () => {
            const script = document.createElement('script');
            script.textContent = 'window.injected = true';
            const blocked = new Promise((resolve) =>
              document.addEventListener('securitypolicyviolation', resolve, { once: true }),
            );
            document.body.append(script);
            await blocked;
            return (window as unknown as { injected?: boolean }).injected === true;
          });
          expect(ran).toBe(false);
        }
        expect(await outsideViewport(page), `${colorScheme} ${width}`).toEqual([]);
        expect(blocking(await axeViolations(page)), `${colorScheme} ${width}`).toEqual([]);
        // Every control is in view and big enough to hit.
        for (const id of ['new-session', 'send', 'preempt']) {
          const box = (await page.locator(`#${id}`).boundingBox())!;
          expect(box.x + box.width, `${id} at ${width}`).toBeLessThanOrEqual(width);
        }
        const background = await page.evaluate(
          () => getComputedStyle(document.body).backgroundColor,
        );
        expect(background).toBe(colorScheme === 'dark' ? 'rgb(17, 20, 24)' : 'rgb(246, 247, 249)');
        await shoot(page, `chat-${width}-${colorScheme}`);
        await page.close();
      }
    }
  }, 90_000);
});
