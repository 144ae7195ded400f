/**
 * What the page tests and `npm run screenshots` (scripts/screenshots.ts) share, with no test
 * runner: Debian's /usr/bin/chromium through playwright-core (no browser is ever downloaded),
 * and a simulated clock moved only once the page has shown every event logged so far.
 */
import { chromium, type Browser, type Page } from 'playwright-core';

/** Where Debian installs Chromium (`apt-get install -y chromium`). */
export const executablePath = '/usr/bin/chromium';

/** Launches Debian's Chromium, headless, with no network of its own. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** What {@link advanceUntil} needs of the server under test. */
export interface ClockedServer {
  readonly server: {
    runtime: {
      eventLog: { lastSeq: (ctx: object, key: { ownerId: string; sessionId: string }) => number };
    };
  };
  readonly clock: { increment: (ms: number) => void };
  /** How far the clock moves per step, in ms (the demo model's pause before each word). */
  readonly stepMs: number;
}

/** Waits until the chat page has applied every event its session logged so far. */
async function caughtUp(page: Page, at: ClockedServer, sessionId: string): Promise<void> {
  const seq = at.server.runtime.eventLog.lastSeq({}, { ownerId: 'dev', sessionId });
  await page.waitForFunction(
    (want) => Number(document.getElementById('cursor')?.textContent) >= want,
    seq,
  );
}

/**
 * Moves the simulated clock one step at a time, each time after the page caught up, until
 * `done` holds: nothing depends on the wall clock.
 */
export async function advanceUntil(
  page: Page,
  at: ClockedServer,
  sessionId: string,
  done: () => Promise<boolean>,
): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    await caughtUp(page, at, sessionId);
    if (await done()) return;
    at.clock.increment(at.stepMs);
  }
  // Say what the page showed, so a failure names its state instead of only its timeout.
  const shown = await page.evaluate(() => ({
    session: document.getElementById('session')?.textContent,
    cursor: document.getElementById('cursor')?.textContent,
    turns: Array.from(document.querySelectorAll<HTMLElement>('article.turn')).map(
      (t) => t.dataset.outcome ?? t.dataset.status ?? '?',
    ),
  }));
  throw new Error(`the condition never held; the page showed ${JSON.stringify(shown)}`);
}

/**
 * Shuts a server down whose clock is simulated: shutdown's own timers run on that clock, so it
 * moves 100 ms at a time until the server is down.
 */
export async function stopServer(
  server: { shutdown: (options: { graceMs: number }) => Promise<unknown> } | undefined,
  clock: { increment: (ms: number) => void },
): Promise<void> {
  if (server === undefined) return;
  let down = false;
  const stopped = server.shutdown({ graceMs: 0 }).finally(() => (down = true));
  for (let i = 0; i < 1_000 && !down; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    clock.increment(100);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await stopped;
}
