/**
 * `node --import tsx bench/timeline-redraw.ts [N ...]`: what one redraw of the live timeline
 * (`/inspect`, last-minute view) costs in headless Chromium once the page holds N runs that
 * ended before the window, plus the two runs of the last minute. Never part of `npm test`.
 *
 * The runs come from a real runtime on the scripted demo model (a `SimulatedClock` set to the
 * epoch time, as a real clock's transitions are) through a timeline hub, served with
 * `renderTimelinePage({ liveUrl })` on node:http as in README "Live timeline". Each redraw is
 * timed in the page (`performance.now()` around a click on "Last minute", which redraws at
 * once; `ScriptDuration` of the DevTools protocol's Performance metrics gives the script part,
 * which includes the `page.evaluate` around each click); the JS function calls one redraw makes are counted with the DevTools protocol's
 * precise coverage. Nothing is added to the page for it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { SimulatedClock } from 'xstate';
import { createRuntime, createTimelineHub, renderTimelinePage } from '../src/index.js';
import { createDemoAgent } from '../src/server/demo-agent.js';
import { launchChromium } from '../test/pages/page-driver.js';

const sizes = process.argv.slice(2).map(Number);
const counts = sizes.length > 0 ? sizes : [100, 500, 2_000];
const browser = await launchChromium();

for (const n of counts) {
  const clock = new SimulatedClock();
  clock.set(Date.now() - 36_000_000 - n * 10_000); // old runs: long before the last minute
  const hub = createTimelineHub({ clock, historyLimit: 1_000_000 });
  const runtime = createRuntime({ clock, inspect: hub.inspect, reportError: () => undefined });
  const agent = createDemoAgent({ clock, chunkDelayMs: 1 });
  const runOne = async (i: number) => {
    const run = runtime.prepare({
      ownerId: 'dev',
      sessionId: `s${i % 10}`,
      agent,
      input: `hello ${i}`,
    });
    run.start();
    let settled = false;
    void run.termination.then(() => (settled = true));
    while (!settled) {
      await new Promise((resolve) => setImmediate(resolve));
      clock.increment(5);
    }
  };
  for (let i = 0; i < n; i++) await runOne(i);
  clock.set(Date.now() - 5_000);
  await runOne(n);
  await runOne(n + 1);

  let connections = 0;
  const server = createServer((request, response) => {
    if (request.url === '/inspect') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end(renderTimelinePage({ liveUrl: '/inspect/stream' }));
      return;
    }
    const abort = new AbortController();
    connections++;
    response.on('close', () => abort.abort());
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    Readable.fromWeb(
      hub.stream('dev', {
        after: Number(request.headers['last-event-id'] ?? 0),
        signal: abort.signal,
      }) as never,
    ).pipe(response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/inspect`;
  const kept = hub.history('dev').length;

  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(url);
  await page.waitForFunction((want) => Number(document.body.dataset.transitions) >= want, kept);
  await page.waitForFunction(() => document.body.dataset.view === 'recent');
  const redraw = () =>
    page.evaluate(() => {
      const start = performance.now();
      document.getElementById('view-recent')!.click();
      return performance.now() - start;
    });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const scriptSeconds = async () => {
    const { metrics } = await cdp.send('Performance.getMetrics');
    return metrics.find((metric) => metric.name === 'ScriptDuration')!.value;
  };
  for (let i = 0; i < 5; i++) await redraw(); // warm up
  const times: number[] = [];
  const scriptBefore = await scriptSeconds();
  for (let i = 0; i < 50; i++) times.push(await redraw());
  const scriptMs = (((await scriptSeconds()) - scriptBefore) * 1000) / 50;
  times.sort((a, b) => a - b);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await cdp.send('Profiler.takePreciseCoverage'); // resets the counts
  await redraw();
  const { result } = await cdp.send('Profiler.takePreciseCoverage');
  await cdp.send('Profiler.stopPreciseCoverage');
  const calls = result
    .filter((script) => script.url.endsWith('/inspect'))
    .flatMap((script) => script.functions)
    .reduce((sum, fn) => sum + fn.ranges[0]!.count, 0);
  await cdp.send('HeapProfiler.collectGarbage');
  const heap = await cdp.send('Runtime.getHeapUsage');
  const shown = await page.evaluate(() => ({
    lanes: document.querySelectorAll('.lane').length,
    hidden: document.body.dataset.hiddenRuns,
  }));
  console.log(
    JSON.stringify({
      runs: n + 2,
      connections,
      transitions: kept,
      lanesShown: shown.lanes,
      hiddenRuns: Number(shown.hidden),
      redrawMsP50: Number(times[25]!.toFixed(2)),
      redrawMsP90: Number(times[45]!.toFixed(2)),
      scriptMsPerRedraw: Number(scriptMs.toFixed(3)),
      callsPerRedraw: calls,
      heapMB: Number((heap.usedSize / 1e6).toFixed(2)),
    }),
  );
  await page.close();
  server.closeAllConnections();
  server.close();
  await runtime.shutdown({ graceMs: 0 });
}
await browser.close();
