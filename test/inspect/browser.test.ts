/**
 * The viewer pages in headless Chromium (Debian's /usr/bin/chromium through playwright-core; no
 * browser is ever downloaded). Screenshots go to test-artifacts/ (not committed).
 *
 * Nothing here waits on the wall clock to decide an outcome: the runtime runs on a
 * SimulatedClock, and the page is waited for by the DOM state it must reach (Playwright's
 * `waitForSelector`, whose timeout only bounds a failure).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import {
  CancelMode,
  createRuntime,
  createTimelineHub,
  renderTimelinePage,
  type Agent,
} from '../../src/index.js';
import { registeredMachines } from '../../src/inspect/machine-registry.js';
import { tick } from '../helpers.js';
import { launchChromium, skipBrowser as skip } from '../pages/browser.js';
import { createRecordedRuntime, steppingAgent } from './timeline-helpers.js';

const root = join(import.meta.dirname, '..', '..');
const artifacts = join(root, 'test-artifacts', 'browser');

const waitsForSignal: Agent<string, string> = {
  execute: (_input, ctx) =>
    new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('aborted'))),
};

/** Records a trace with a cancelled, an interrupted, a preempted and an escalated run. */
async function recordScenario(): Promise<string> {
  const { runtime, advance, trace } = createRecordedRuntime();
  const chat = (sessionId: string) => ({ ownerId: 'alice', sessionId });
  const interrupted = runtime.prepare({
    ...chat('chat-1'),
    agent: steppingAgent(5, 100),
    input: 'i',
    runId: 'interrupted',
  });
  const cancelled = runtime.prepare({
    ...chat('chat-1'),
    agent: steppingAgent(1, 10),
    input: 'c',
    runId: 'cancelled',
  });
  const preempted = runtime.prepare({
    ...chat('chat-2'),
    agent: steppingAgent(10, 100),
    input: 'p',
    runId: 'preempted',
  });
  const stubborn = runtime.prepare({
    ...chat('chat-3'),
    agent: waitsForSignal,
    input: 's',
    runId: 'stubborn',
  });
  for (const run of [interrupted, cancelled, preempted, stubborn]) run.start();
  await advance(50);
  cancelled.cancel({ reason: 'user clicked cancel' }); // t = 50, while queued
  await advance(50);
  stubborn.cancel({ mode: CancelMode.AnySafePoint, timeoutMs: 100 }); // t = 100, escalates at 200
  await advance(50);
  interrupted.interrupt('user pressed stop'); // t = 150, noticed at 200
  await advance(100);
  const urgent = runtime.prepare({
    ...chat('chat-2'),
    agent: steppingAgent(2, 100),
    input: 'u',
    runId: 'urgent',
    strategy: 'preempt',
    graceMs: 1_000,
  });
  urgent.start(); // t = 250: preempted stops at its safe point at 300
  await advance(300);
  const outcomes = await Promise.all(
    [interrupted, cancelled, preempted, stubborn, urgent].map((run) => run.termination),
  );
  expect(outcomes.map((o) => o.status)).toEqual([
    'COMPLETED',
    'CANCELLED',
    'CANCELLED',
    'CANCELLED',
    'COMPLETED',
  ]);
  return trace();
}

let scenario: Promise<string> | undefined;
/** The scenario's trace, recorded once for the tests that need it. */
const scenarioTrace = () => (scenario ??= recordScenario());

/** Lane summaries as the page shows them. */
function readLanes(page: Page) {
  return page.$$eval('section.group', (groups) =>
    groups.map((group) => ({
      session: (group as HTMLElement).dataset.session,
      lanes: Array.from(group.querySelectorAll<HTMLElement>('.lane')).map((lane) => ({
        id: lane.dataset.laneId,
        actor: lane.dataset.actor,
        status: lane.dataset.status,
        cause: lane.dataset.cause ?? null,
        states: Array.from(lane.querySelectorAll<HTMLElement>('.seg')).map((s) => s.dataset.state),
        markers: Array.from(lane.querySelectorAll<HTMLElement>('.marker')).map(
          (m) => m.dataset.marker,
        ),
      })),
    })),
  );
}

describe.skipIf(skip)('viewer pages in headless Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
  });

  it('the timeline of a recorded trace shows the right lanes, states and markers', async () => {
    const tracePath = join(artifacts, 'trace.jsonl');
    writeFileSync(tracePath, await scenarioTrace());
    const htmlPath = join(artifacts, 'timeline.html');
    await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(root, 'src', 'cli.ts'), 'timeline', tracePath, '-o', htmlPath],
      { cwd: root },
    );

    const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
    const requests: string[] = [];
    const errors: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`file://${htmlPath}`);
    await page.waitForSelector('body[data-ready="true"]');

    const groups = await readLanes(page);
    expect(groups.map((g) => g.session)).toEqual(['alice/chat-1', 'alice/chat-2', 'alice/chat-3']);
    const lanes = Object.fromEntries(
      groups.flatMap((g) => g.lanes).map((l) => [l.id ?? '', l] as const),
    );
    expect(groups[0]!.lanes.map((l) => l.id)).toEqual(['alice/chat-1', 'interrupted', 'cancelled']);
    expect(groups[1]!.lanes.map((l) => l.id)).toEqual(['alice/chat-2', 'preempted', 'urgent']);
    expect(lanes.interrupted).toEqual({
      id: 'interrupted',
      actor: 'run',
      status: 'COMPLETED',
      cause: 'interrupted',
      // Each session's first run is admitted as it starts: CREATED → RUNNING in one step.
      states: ['CREATED', 'RUNNING', 'COMPLETED'],
      markers: ['interrupt'],
    });
    expect(lanes.cancelled).toMatchObject({
      status: 'CANCELLED',
      cause: 'cancel',
      states: ['CREATED', 'QUEUED', 'CANCELLED.settled'],
      markers: ['cancel'],
    });
    expect(lanes.preempted).toMatchObject({
      status: 'CANCELLED',
      states: ['CREATED', 'RUNNING', 'cancelling', 'CANCELLED.unwinding', 'CANCELLED.settled'],
      markers: ['preempt'],
    });
    expect(lanes.urgent).toMatchObject({ status: 'COMPLETED', markers: [] });
    expect(lanes.stubborn).toMatchObject({
      status: 'CANCELLED',
      states: ['CREATED', 'RUNNING', 'cancelling', 'CANCELLED.unwinding', 'CANCELLED.settled'],
      markers: ['cancel', 'escalation'],
    });
    expect(lanes['alice/chat-2']).toMatchObject({ actor: 'session', markers: ['preempt'] });

    // Segments are drawn to scale: preempted ran 0–250 ms, then was cancelling 250–300 ms.
    const box = async (lane: string, state: string) =>
      (await page
        .locator(`.lane[data-lane-id="${lane}"] .seg[data-state="${state}"]`)
        .boundingBox())!;
    const working = await box('preempted', 'RUNNING');
    const cancelling = await box('preempted', 'cancelling');
    expect(working.width / cancelling.width).toBeCloseTo(5, 0);
    expect(cancelling.x).toBeCloseTo(working.x + working.width, 0);

    // Details on hover.
    await page.hover('.lane[data-lane-id="preempted"] .marker[data-marker="preempt"]');
    const tooltip = page.locator('#tooltip');
    await expect.poll(() => tooltip.isVisible()).toBe(true);
    const tip = await tooltip.textContent();
    expect(tip).toContain('PREEMPT');
    expect(tip).toContain('run preempted');
    expect(tip).toContain('RUNNING → cancelling');
    await page.hover('.lane[data-lane-id="cancelled"] .seg[data-state="QUEUED"]');
    await expect.poll(() => tooltip.textContent()).toContain('state    QUEUED');
    expect(await tooltip.textContent()).toContain('lasted   50 ms');

    await page.screenshot({ path: join(artifacts, 'timeline.png'), fullPage: true });

    // Zoom: twice the pixels per millisecond.
    await page.click('#zoom-in');
    const zoomed = await box('preempted', 'cancelling');
    expect(zoomed.width / cancelling.width).toBeCloseTo(2, 1);

    await page.screenshot({ path: join(artifacts, 'timeline-zoomed.png'), fullPage: true });
    expect(errors).toEqual([]);
    expect(requests.every((url) => url.startsWith('file:') || url.startsWith('data:'))).toBe(true);
    await page.close();
  });

  it('an empty viewer page opens a trace file', async () => {
    const emptyPath = join(artifacts, 'empty.html');
    writeFileSync(emptyPath, renderTimelinePage());
    const page = await browser.newPage();
    await page.goto(`file://${emptyPath}`);
    await page.waitForSelector('body.empty[data-ready="true"]');
    expect(await page.textContent('#source')).toBe('no trace loaded');
    await page.setInputFiles('#file', {
      name: 'opened.jsonl',
      mimeType: 'application/x-ndjson',
      buffer: Buffer.from(await scenarioTrace()),
    });
    await page.waitForSelector('.lane[data-lane-id="preempted"][data-status="CANCELLED"]');
    expect(await page.textContent('#source')).toBe('opened.jsonl');
    expect(await page.locator('.run-lane').count()).toBe(5);
    await page.setInputFiles('#file', {
      name: 'broken.jsonl',
      mimeType: 'application/x-ndjson',
      buffer: Buffer.from('{"t":0,"actor":"run"}\n'),
    });
    await page.waitForSelector('#error.show');
    expect(await page.textContent('#error')).toBe(
      'Cannot read the trace: line 1 is not a timeline transition',
    );
    await page.close();
  });

  it('the machine diagrams page renders every registered machine offline with Mermaid', async () => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const remote: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith('file:')) remote.push(request.url());
    });
    await page.goto(`file://${join(root, 'visualizations', 'index.html')}`);
    await page.waitForSelector('body[data-rendered]', { timeout: 30_000 });
    expect(await page.textContent('#status')).toBe('');
    expect(await page.getAttribute('body', 'data-rendered')).toBe('true');
    const drawn = await page.$$eval('pre.mermaid', (blocks) =>
      blocks.map((block) => ({
        machine: (block as HTMLElement).dataset.machine,
        svg: block.querySelector('svg') !== null,
        text: block.textContent ?? '',
      })),
    );
    expect([...new Set(drawn.map((d) => d.machine))]).toEqual(
      registeredMachines.map(({ name }) => name),
    );
    expect(drawn.every((d) => d.svg)).toBe(true);
    // Laid out so a person can read it: each diagram is flat (no box drawn around its states, so
    // none can fall outside one), and no edge label covers another label or a state.
    const problems = await page.$$eval('pre.mermaid', (blocks) =>
      blocks.flatMap((block) => {
        const name = `${(block as HTMLElement).dataset.machine}:${(block as HTMLElement).dataset.part}`;
        const boxes = (selector: string) =>
          Array.from(block.querySelectorAll(selector))
            .map((e) => ({ text: (e.textContent ?? '').trim(), box: e.getBoundingClientRect() }))
            .filter(({ box }) => box.width > 0 && box.height > 0);
        const overlap = (a: DOMRect, b: DOMRect) =>
          Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
            Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top)) >
          1;
        const labels = boxes('g.edgeLabel');
        const states = boxes('g.node');
        const found: string[] = [];
        if (block.querySelector('g.cluster') !== null) found.push(`${name}: a nested box`);
        labels.forEach((a, i) => {
          for (const b of labels.slice(i + 1)) {
            if (overlap(a.box, b.box)) found.push(`${name}: "${a.text}" covers "${b.text}"`);
          }
          for (const b of states) {
            if (overlap(a.box, b.box)) found.push(`${name}: "${a.text}" covers state ${b.text}`);
          }
        });
        return found;
      }),
    );
    expect(problems).toEqual([]);
    const text = drawn.map((d) => d.text).join(' ');
    for (const label of ['CREATED', 'cancelling', 'unwinding', 'interrupting', 'run.admit']) {
      expect(text).toContain(label);
    }
    expect(remote).toEqual([]);
    await page.screenshot({ path: join(artifacts, 'diagrams.png'), fullPage: true });
    await page.close();
  });

  describe('live at /inspect over SSE', () => {
    let server: Server;
    let origin: string;
    const clock = new SimulatedClock();
    const hub = createTimelineHub({ clock });
    const runtime = createRuntime({ clock, inspect: hub.inspect, reportError: () => undefined });
    const tokens: Record<string, string> = { 'token-alice': 'alice', 'token-bob': 'bob' };
    const authorizations: string[] = [];

    beforeAll(async () => {
      // What the service is expected to mount (see README "Live timeline"), on node:http.
      server = createServer((request, response) => {
        const url = new URL(request.url ?? '/', 'http://localhost');
        if (url.pathname === '/inspect') {
          response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
          response.end(renderTimelinePage({ title: 'live', liveUrl: '/inspect/stream' }));
          return;
        }
        if (url.pathname === '/inspect/stream') {
          const header = request.headers.authorization ?? '';
          authorizations.push(header);
          const ownerId = tokens[header.replace(/^Bearer /, '')];
          if (ownerId === undefined) {
            response.writeHead(401).end();
            return;
          }
          const abort = new AbortController();
          request.on('close', () => abort.abort());
          const lastId = Number(request.headers['last-event-id'] ?? 0);
          response.writeHead(200, {
            'content-type': 'text/event-stream',
            'cache-control': 'no-cache',
          });
          Readable.fromWeb(
            hub.stream(ownerId, { after: lastId, signal: abort.signal }) as never,
          ).pipe(response);
          return;
        }
        response.writeHead(404).end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await runtime.shutdown({ graceMs: 0 });
    });

    it("follows the owner's runs as they happen, and only the owner's", async () => {
      const page = await browser.newPage({ viewport: { width: 1200, height: 600 } });
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${origin}/inspect#token=token-alice`);
      await page.waitForSelector('body[data-live="open"]');
      expect(await page.evaluate(() => location.hash)).toBe(''); // the token left the address bar
      expect(authorizations).toContain('Bearer token-alice');

      const bobs = runtime.prepare({
        ownerId: 'bob',
        sessionId: 'chat',
        agent: steppingAgent(1, 10),
        input: 'b',
        runId: 'bob-run',
      });
      const alices = runtime.prepare({
        ownerId: 'alice',
        sessionId: 'chat',
        agent: steppingAgent(3, 10),
        input: 'a',
        runId: 'alice-run',
      });
      bobs.start();
      alices.start();
      await page.waitForSelector('.lane[data-lane-id="alice-run"][data-state="RUNNING"]');
      for (let i = 0; i < 3; i++) {
        await tick();
        clock.increment(10);
        await tick();
      }
      await alices.termination;
      await bobs.termination;
      await page.waitForSelector('.lane[data-lane-id="alice-run"][data-status="COMPLETED"]');
      // Bob's run ended before Alice's did; in order, nothing of Bob's ever reached this page.
      expect(await page.locator('.lane[data-lane-id="bob-run"]').count()).toBe(0);
      expect(
        await page
          .locator('section.group')
          .evaluateAll((g) => g.map((e) => (e as HTMLElement).dataset.session)),
      ).toEqual(['alice/chat']);
      await page.screenshot({ path: join(artifacts, 'live.png') });
      expect(errors).toEqual([]);
      await page.close();
    });

    it('says so, and stops, when the stream refuses the token', async () => {
      const page = await browser.newPage();
      await page.goto(`${origin}/inspect#token=not-a-token`);
      await page.waitForSelector('body[data-live="unauthorized"]');
      expect(await page.textContent('#live-status')).toBe(
        'not authorized (HTTP 401): open this page as /inspect#token=<your token>',
      );
      expect(authorizations).toContain('Bearer not-a-token');
      await page.close();
    });

    it('refuses a live URL on another origin', async () => {
      const page = await browser.newPage();
      const requests: string[] = [];
      page.on('request', (request) => requests.push(request.url()));
      await page.goto(`${origin}/inspect?sse=${encodeURIComponent('http://127.0.0.2:9/steal')}`);
      await page.waitForSelector('#error.show');
      expect(await page.textContent('#error')).toContain("must be on this page's origin");
      expect(requests.some((url) => new URL(url).hostname === '127.0.0.2')).toBe(false);
      await page.close();
    });
  });
});
