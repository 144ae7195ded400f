/**
 * Helpers for the page tests in headless Chromium: Debian's /usr/bin/chromium through
 * playwright-core (no browser is ever downloaded), an axe-core check, and screenshots in
 * light and dark at the widths a person uses (test-artifacts/pages, not committed).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import axe from 'axe-core';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { SimulatedClock } from 'xstate';
import { startServer, type RunningServer, type ServeOptions } from '../../src/server/serve.js';
import { executablePath, launchChromium, stopServer, type ClockedServer } from './page-driver.js';

export { advanceUntil, launchChromium } from './page-driver.js';

/** Skipped where Chromium is missing, except in CI, where the tests run and fail instead. */
export const skipBrowser = !existsSync(executablePath) && process.env.CI === undefined;
if (skipBrowser) {
  console.warn(
    `[page tests skipped] ${executablePath} is missing; install it with: apt-get install -y chromium (CI never skips)`,
  );
}

const artifacts = join(import.meta.dirname, '..', '..', 'test-artifacts', 'pages');

/** axe-core's browser script, injected into the page under test. */
const axeSource = axe.source;

/** A violation as the tests report it: rule, impact and how many nodes. */
export interface AxeFinding {
  readonly id: string;
  readonly impact: string | null;
  readonly nodes: readonly string[];
}

/**
 * Runs axe-core (WCAG 2 A and AA rules and best practices) on the page as it is now.
 *
 * @returns every violation, each with the selectors of its nodes
 */
export async function axeViolations(page: Page): Promise<AxeFinding[]> {
  await page.evaluate(axeSource);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (o: unknown) => Promise<unknown> } }).axe;
    const result = (await axe.run({
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa', 'best-practice'] },
    })) as {
      violations: Array<{ id: string; impact: string | null; nodes: Array<{ target: unknown[] }> }>;
    };
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map((n) => n.target.join(' ')),
    }));
  });
}

/** Only the violations a person is blocked by: impact `serious` or `critical`. */
export const blocking = (findings: readonly AxeFinding[]) =>
  findings.filter((f) => f.impact === 'serious' || f.impact === 'critical');

/**
 * Elements whose box pokes out of the viewport sideways (nothing should at 360 px), ignoring
 * those inside a scrolling container that clips them (`overflow` other than visible).
 *
 * @returns a description of each: tag, id or class, and its left/right edges
 */
export function outsideViewport(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const clipped = (node: Element) => {
      for (let p = node.parentElement; p !== null && p !== document.body; p = p.parentElement) {
        const style = getComputedStyle(p);
        if (style.overflowX !== 'visible' || style.overflow !== 'visible') return true;
      }
      return false;
    };
    const out: string[] = [];
    for (const node of Array.from(document.body.querySelectorAll('*'))) {
      const box = node.getBoundingClientRect();
      if (box.width === 0 || box.height === 0) continue;
      if ((box.left < -0.5 || box.right > width + 0.5) && !clipped(node)) {
        out.push(
          `${node.tagName.toLowerCase()}#${node.id}.${String(node.className)} ${box.left}..${box.right}`,
        );
      }
    }
    return out;
  });
}

/**
 * Records what the page's Content-Security-Policy refused from now on (Chromium reports each as
 * a console error, and the document fires `securitypolicyviolation`).
 *
 * @returns the list the refusals are pushed to, as `directive: blocked URI or 'inline'`
 */
export function recordPolicyViolations(page: Page): string[] {
  const refused: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) {
      refused.push(message.text());
    }
  });
  return refused;
}

/** Saves a screenshot under test-artifacts/pages, to look at. */
export async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: false });
}

/**
 * A real `runplane serve` (SQLite file in a temporary folder, free port, the given clock) and a
 * Chromium for the tests of one file: started before them, stopped after.
 *
 * @returns getters for the server and the browser, valid inside the tests
 */
export function usePageServer(
  clock: SimulatedClock,
  options: Omit<ServeOptions, 'port' | 'dbPath' | 'clock'>,
): { readonly server: RunningServer; readonly browser: Browser } {
  let server: RunningServer | undefined;
  let browser: Browser | undefined;
  let dir = '';
  beforeAll(async () => {
    if (skipBrowser) return;
    dir = mkdtempSync(join(tmpdir(), 'runplane-pages-'));
    server = await startServer({
      port: 0,
      dbPath: join(dir, 'runplane.db'),
      clock,
      lingerMs: 0, // idle keep-alive connections (the tests' fetches) close at shutdown
      log: () => undefined,
      ...options,
    });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    if (skipBrowser) return;
    await browser?.close();
    await stopServer(server, clock);
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);
  return {
    get server() {
      return server!;
    },
    get browser() {
      return browser!;
    },
  };
}

/**
 * The chat page's server for the tests of one file: the demo agent on a simulated clock that
 * {@link advanceUntil} moves `stepMs` a step (the demo model's pause before each word).
 *
 * @returns the clock, the server and browser ({@link usePageServer}), what `advanceUntil` needs
 * (`at`), `open(page)`: the page with the dev token, once it follows its session, and
 * `tabOn(sessionId, width, colorScheme)`: a new tab that reopens that session (its id is kept in
 * `localStorage`), not yet opened, and `newSession(page)`: clicks "New session" and returns the new
 * session's id once the page follows it
 */
export function useChatPageServer(stepMs = 60) {
  const clock = new SimulatedClock();
  const pages = usePageServer(clock, { chunkDelayMs: stepMs });
  const at: ClockedServer = {
    get server() {
      return pages.server;
    },
    clock,
    stepMs,
  };
  const open = async (page: Page) => {
    await page.goto(`${pages.server.url}/#token=${pages.server.devToken}`);
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
  };
  /**
   * Clicks "New session" and waits until the page shows and follows the new one: `conn` is
   * already `live` from the session before, so waiting for it alone can read the old id.
   */
  const newSession = async (page: Page): Promise<string> => {
    const before = (await page.locator('#session').textContent()) ?? '';
    await page.click('#new-session');
    await page.waitForFunction(
      (old) =>
        document.getElementById('session')?.textContent !== old &&
        document.getElementById('conn')?.textContent === 'live',
      before,
    );
    return (await page.locator('#session').textContent()) ?? '';
  };
  const tabOn = (sessionId: string, width: number, colorScheme: 'light' | 'dark') =>
    pages.browser.newPage({ viewport: { width, height: 800 }, colorScheme }).then(async (page) => {
      await page.addInitScript((id) => localStorage.setItem('runplane.session', id), sessionId);
      return page;
    });
  return { clock, pages, at, open, newSession, tabOn };
}
