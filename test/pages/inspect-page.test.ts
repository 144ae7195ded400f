/**
 * The live inspector (`/inspect`) of a real `runplane serve` (HTTP socket, SQLite file) in
 * headless Chromium, as a person sees it: lanes labelled with the message that started each
 * run, the last minute by default, every lane drawn at every zoom step, no serious
 * accessibility violation, usable at 360 px, light and dark.
 *
 * The server's clock is simulated: time moves only when the test moves it, and the page is
 * waited for by the DOM state it must reach (a timeout only bounds a failure).
 */
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { sleep, type Agent } from '../../src/index.js';
import { tick } from '../helpers.js';
import {
  axeViolations,
  blocking,
  outsideViewport,
  recordPolicyViolations,
  shoot,
  skipBrowser,
  usePageServer,
} from './browser.js';

/** Works for one simulated second, then answers. */
const oneSecond: Agent<string, unknown> = {
  execute: async (input, ctx) => {
    await sleep(ctx.clock, 1_000, ctx.signal);
    return { reply: `done: ${input}` };
  },
};

const clock = new SimulatedClock();
const pages = usePageServer(clock, { agent: oneSecond });

/** Calls the API with the dev token. */
async function api(method: string, path: string, body?: unknown) {
  const response = await fetch(`${pages.server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${pages.server.devToken}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(response.ok).toBe(true);
  return (await response.json()) as Record<string, unknown>;
}

/** Sends a message; returns its run id. */
async function send(sessionId: string, text: string): Promise<string> {
  const answer = (await api('POST', `/api/sessions/${sessionId}/events`, {
    events: [{ type: 'user.message', payload: { text } }],
  })) as { results: Array<{ run_id: string }> };
  return answer.results[0]!.run_id;
}

/** Moves the clock in 100 ms steps, letting callbacks run between them. */
async function advance(ms: number) {
  for (let left = ms; left > 0; left -= 100) {
    await tick();
    clock.increment(Math.min(100, left));
    await tick();
  }
}

/** Every lane: its id, label text, and whether Chromium draws it (a box, not skipped). */
async function lanesAsSeen(page: Page) {
  // Two frames: what Chromium skips (content-visibility) is decided at a rendering update.
  await page.evaluate(
    () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))),
  );
  return page.$$eval('.lane', (lanes) =>
    lanes.map((lane) => {
      const box = lane.getBoundingClientRect();
      const label = lane.querySelector('.label')!;
      return {
        id: (lane as HTMLElement).dataset.laneId,
        label: label.textContent,
        drawn:
          box.width > 0 &&
          box.height > 0 &&
          label.getBoundingClientRect().height > 0 &&
          lane.checkVisibility({ contentVisibilityAuto: true }),
        segments: Array.from(lane.querySelectorAll('.seg')).filter((seg) => {
          const b = seg.getBoundingClientRect();
          return (
            b.width > 0 && b.height > 0 && seg.checkVisibility({ contentVisibilityAuto: true })
          );
        }).length,
      };
    }),
  );
}

describe.skipIf(skipBrowser)('the live inspector at /inspect', () => {
  let sessionId: string;
  const runs: Record<string, string> = {};

  beforeAll(async () => {
    sessionId = (await api('POST', '/api/sessions', {})).session_id as string;
    runs.old = await send(sessionId, 'first question, about last month’s invoices');
    await advance(1_500);
    await advance(120_000); // two quiet minutes
    runs.now = await send(sessionId, 'summarize the meeting notes');
    runs.next = await send(sessionId, 'then draft a reply to Ana');
    await advance(1_300); // the second has answered; the third runs
  });

  it('shows the last minute, lanes labelled with their messages; "All" brings back the rest', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 720 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${pages.server.url}/inspect#token=${pages.server.devToken}`);
    await page.waitForSelector(`.lane[data-lane-id="${runs.now}"] .name:has-text("summarize")`);
    expect(await page.getAttribute('body', 'data-view')).toBe('recent');
    expect(await page.getAttribute('#view-recent', 'aria-pressed')).toBe('true');

    const recent = await lanesAsSeen(page);
    expect(recent.map((lane) => [lane.id, lane.label])).toEqual([
      [`dev/${sessionId}`, expect.stringContaining(sessionId)],
      [runs.now, '#2“summarize the meeting notes”COMPLETED'],
      [runs.next, '#3“then draft a reply to Ana”RUNNING'],
    ]);
    expect(await page.textContent('#hidden-note')).toBe(
      '1 run ended before this view; press “All” to see them.',
    );
    // The window starts where the recent activity does: the running lane is no sliver.
    const running = await page
      .locator(`.lane[data-lane-id="${runs.now}"] .seg[data-state="RUNNING"]`)
      .boundingBox();
    expect(running!.width).toBeGreaterThan(500);
    await shoot(page, 'inspect-1280-light');

    await page.click('#view-all');
    await page.waitForSelector(`.lane[data-lane-id="${runs.old}"]`);
    const all = await lanesAsSeen(page);
    expect(all.map((lane) => lane.label)).toContain(
      '#1“first question, about last month’s invoices”COMPLETED',
    );
    expect(await page.locator('#hidden-note').count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('draws every lane at every zoom step, in and out, as new transitions arrive', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 720 } });
    await page.goto(`${pages.server.url}/inspect#token=${pages.server.devToken}`);
    await page.waitForSelector(`.lane[data-lane-id="${runs.next}"] .name:has-text("Ana")`);
    let sent = 0;
    for (const [button, steps] of [
      ['#zoom-in', 8],
      ['#zoom-out', 10],
    ] as const) {
      for (let step = 1; step <= steps; step++) {
        await page.click(button);
        // Live pages redraw their lanes on every transition: the zoom must survive that.
        const runId = await send(sessionId, `note ${++sent}`);
        await page.waitForSelector(`.lane[data-lane-id="${runId}"]`, { state: 'attached' });
        const lanes = await lanesAsSeen(page);
        // Zooming in while following narrows the window at "now": a run that ended before it
        // is counted in the note ("ended before this view"), every other lane is drawn.
        const hidden = Number(await page.getAttribute('body', 'data-hidden-runs'));
        expect(lanes.length + hidden, `${button} step ${step}`).toBe(4 + sent);
        expect(
          lanes.filter((lane) => !lane.drawn).map((lane) => lane.id),
          `${button} step ${step}`,
        ).toEqual([]);
      }
    }
    // Ctrl + wheel zooms too, and the lanes stay.
    await page.hover('#lanes');
    for (let step = 0; step < 6; step++) {
      await page.keyboard.down('Control');
      await page.mouse.wheel(0, -100);
      await page.keyboard.up('Control');
    }
    await send(sessionId, 'one more');
    await page.waitForSelector('.lane .name:has-text("one more")', { state: 'attached' });
    expect((await lanesAsSeen(page)).every((lane) => lane.drawn)).toBe(true);
    await page.close();
  }, 60_000);

  it('zooms in around "now" while following: the newest run stays in view', async () => {
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 720 } });
    await page.goto(`${pages.server.url}/inspect#token=${pages.server.devToken}`);
    await page.waitForSelector('.lane[data-actor="run"]');
    for (let step = 1; step <= 4; step++) {
      await page.click('#zoom-in');
      const runId = await send(sessionId, `follow ${step}`);
      await advance(200);
      const lane = `.lane[data-lane-id="${runId}"]`;
      await page.waitForSelector(lane);
      // The newest run's last segment starts inside the visible track, right of the labels.
      const seen = await page.evaluate((selector) => {
        const box = document.getElementById('timeline')!.getBoundingClientRect();
        const label = document.querySelector(`${selector} .label`)!.getBoundingClientRect();
        const segs = document.querySelectorAll(`${selector} .seg`);
        const last = segs[segs.length - 1]!.getBoundingClientRect();
        return { left: last.left, from: label.right, to: box.right };
      }, lane);
      expect(seen.left, `step ${step}`).toBeGreaterThanOrEqual(seen.from);
      expect(seen.left, `step ${step}`).toBeLessThan(seen.to);
    }
    await page.close();
  });

  it('the "All" view of a long trace keeps its lanes at every zoom step', async () => {
    // Many sessions make the page taller than the screen, where skipped rendering bit.
    for (let i = 0; i < 12; i++) {
      const id = (await api('POST', '/api/sessions', {})).session_id as string;
      await send(id, `message ${i}`);
    }
    await advance(1_200);
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 500 } });
    await page.goto(`${pages.server.url}/inspect#token=${pages.server.devToken}`);
    await page.waitForSelector('.lane .name:has-text("message 11")');
    await page.click('#view-all');
    for (let step = 1; step <= 8; step++) {
      await page.click('#zoom-in');
      await page.evaluate(() => document.getElementById('timeline')!.scrollTo(0, 1e6));
      const lanes = await lanesAsSeen(page);
      const shown = await page.evaluate(() => {
        const box = document.getElementById('timeline')!.getBoundingClientRect();
        return Array.from(document.querySelectorAll<HTMLElement>('.lane'))
          .filter((lane) => {
            const b = lane.getBoundingClientRect();
            return b.bottom > box.top + 22 && b.top < box.bottom;
          })
          .map((lane) => lane.dataset.laneId);
      });
      expect(shown.length, `zoom step ${step}`).toBeGreaterThan(3);
      const inView = lanes.filter((lane) => shown.includes(lane.id));
      expect(
        inView.every((lane) => lane.drawn),
        `zoom step ${step}`,
      ).toBe(true);
    }
    await page.close();
  });

  it('has no serious accessibility violation, fits 360 px, and follows the dark scheme', async () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      for (const width of [1280, 360]) {
        const page = await pages.browser.newPage({ viewport: { width, height: 720 }, colorScheme });
        const refused = recordPolicyViolations(page);
        await page.goto(`${pages.server.url}/inspect#token=${pages.server.devToken}`);
        await page.waitForSelector(`.lane[data-lane-id="${runs.next}"] .name:has-text("Ana")`);
        expect(refused, `${colorScheme} ${width}`).toEqual([]);
        expect(blocking(await axeViolations(page)), `${colorScheme} ${width}`).toEqual([]);
        expect(await outsideViewport(page), `${colorScheme} ${width}`).toEqual([]);
        const background = await page.evaluate(
          () => getComputedStyle(document.body).backgroundColor,
        );
        expect(background).toBe(colorScheme === 'dark' ? 'rgb(18, 22, 26)' : 'rgb(255, 255, 255)');
        // In the dark, an idle session is a muted bar, not the brightest thing on screen.
        const idle = await page.evaluate(() => {
          const swatch = document.querySelector('#legend .st-idle')!;
          const rgb = getComputedStyle(swatch).backgroundColor.match(/\d+/g)!.map(Number);
          return (rgb[0]! + rgb[1]! + rgb[2]!) / 3;
        });
        if (colorScheme === 'dark') expect(idle).toBeLessThan(90);
        await shoot(page, `inspect-${width}-${colorScheme}`);
        await page.close();
      }
    }
  }, 90_000);
  it("labels a loop session's turns by number and first message, and its loop lane by session", async () => {
    const loopId = (await api('POST', '/api/sessions', { mode: 'loop' })).session_id as string;
    await api('POST', `/api/sessions/${loopId}/events`, {
      events: [{ type: 'user.message', payload: { text: 'hello from the loop' } }],
    });
    await advance(1_500);
    const page = await pages.browser.newPage({ viewport: { width: 1280, height: 720 } });
    await page.goto(`${pages.server.url}/inspect#token=${pages.server.devToken}`);
    await page.waitForSelector('.lane .name:has-text("turn 1 · “hello from the loop”")');
    const lanes = await page.$$eval('.turn-loop-lane', (found) =>
      found.map((lane) => ({
        name: lane.querySelector('.name')!.textContent,
        looks: Array.from(lane.querySelectorAll('.seg'), (seg) => seg.className),
      })),
    );
    expect(lanes).toHaveLength(1);
    expect(lanes[0]!.name).toBe(`loop · session ${loopId.slice(0, 8)}`);
    // Every state of the loop is named (a look the legend explains), none is "other".
    expect(lanes[0]!.looks.join(' ')).toContain('st-loop-turn');
    expect(lanes[0]!.looks.join(' ')).not.toContain('st-other');
    expect(await page.textContent('#legend')).toContain('loop turn');
    await page.close();
  });
});
