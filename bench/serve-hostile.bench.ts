/**
 * `runplane serve` under a hostile client with a valid token (issue 14), RSS against the budgets.
 * The server runs as its own process (node + tsx, as `npm start` does) on a fresh SQLite file;
 * its RSS is read from /proc (Linux). Never part of `npm test`.
 * - Attack 1, the event log tail: 30 fresh sessions × 8 batches of 8 `user.supplement` hints
 *   of 100,000 characters, on a server started with `--max-old-space-size=256`. Before the tail
 *   had a byte budget it pinned 6.4 MB per session and the server died of V8 out-of-memory.
 * - Attack 2, paused SSE readers: 128 streams (one owner's cap) on a session of 100 events of
 *   100 KB, none of them read. Before each stream had a byte budget it buffered 256 frames.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { round, type Figure } from './core.bench.js';
import { listeningUrl } from './server.bench.js';

const TOKEN = 'bench-hostile-token-1';
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const MiB = 1024 * 1024;
/** The defaults of `runplane serve` the figures are held against. */
const eventTailBytes = 8 * MiB;
const streamBufferBytes = 256 * 1024;
const maxStreams = 128;

interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** The resident set size of the server process now, in bytes. */
  rss(): number;
  alive(): boolean;
  stop(): Promise<void>;
}

async function startServer(nodeArgs: string[]): Promise<ServerProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-bench-hostile-'));
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      '--import',
      'tsx',
      'src/cli.ts',
      'serve',
      '--port',
      '0',
      '--db',
      join(dir, 'runplane.db'),
      '--tokens',
      `${TOKEN}:mallory`,
      // The memory bounds are measured here, not the request rate limit: lift it.
      '--rate-limit',
      '1000000',
      '--rate-burst',
      '1000000',
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let exited = false;
  const done = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const url = await listeningUrl(child, done);
  return {
    url,
    child,
    rss() {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1] ?? Number.NaN) * 1024;
    },
    alive: () => !exited,
    async stop() {
      if (!exited) child.kill('SIGKILL');
      await done;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

async function call(server: ServerProcess, method: string, path: string, body?: unknown) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (response.status >= 400) throw new Error(`${method} ${path}: ${response.status}`);
  return json;
}

/** Samples RSS until it stops growing (three samples 250 ms apart within 1 %), at most 20 s. */
async function settledRss(server: ServerProcess): Promise<number> {
  let last = server.rss();
  let steady = 0;
  for (let i = 0; i < 80 && steady < 3; i++) {
    await delay(250);
    const now = server.rss();
    steady = Math.abs(now - last) <= last * 0.01 ? steady + 1 : 0;
    last = now;
  }
  return last;
}

const hint = (text: string) => ({ type: 'user.supplement', payload: { text } });

/** Attack 1: the event log tail. */
async function tailAttack(): Promise<Figure> {
  const server = await startServer(['--max-old-space-size=256']);
  const sessions = 30;
  const warmUp = 10;
  try {
    const batch = { events: Array.from({ length: 8 }, () => hint('x'.repeat(100_000))) };
    const start = await settledRss(server);
    let warm = start;
    let peak = start;
    let survived = 0;
    for (let s = 0; s < sessions && server.alive(); s++) {
      const id = (await call(server, 'POST', '/api/sessions', {})).session_id as string;
      for (let i = 0; i < 8; i++) await call(server, 'POST', `/api/sessions/${id}/events`, batch);
      peak = Math.max(peak, server.rss());
      survived = s + 1;
      // The tail fills its budget within two sessions; the heap and SQLite's cache grow to
      // their working size over the first ones. What a bound must show is the growth after.
      if (survived === warmUp) warm = await settledRss(server);
    }
    const serving = server.alive() && (await fetch(`${server.url}/healthz`)).status === 200;
    const end = serving ? await settledRss(server) : Number.NaN;
    const perSession = (end - warm) / (sessions - warmUp);
    return {
      name: 'serve-hostile: RSS growth per session, sessions 11–30 of 64 hints of 100 KB each (256 MB heap)',
      value: round(perSession / 1024),
      unit: 'KiB',
      target: 'alive and serving; ≤ 256 KiB per session (6,400 KiB before the tail budget)',
      meets: serving && perSession <= 256 * 1024,
      detail: {
        sessionsSurvived: survived,
        rssStartMiB: round(start / MiB),
        rssAfter10MiB: round(warm / MiB),
        rssAfter30MiB: round(end / MiB),
        rssPeakMiB: round(peak / MiB),
        tailBudgetMiB: eventTailBytes / MiB,
      },
    };
  } finally {
    await server.stop();
  }
}

/** Attack 2: paused SSE readers. */
async function pausedReadersAttack(): Promise<Figure> {
  const server = await startServer([]);
  const sockets: http.ClientRequest[] = [];
  try {
    const id = (await call(server, 'POST', '/api/sessions', {})).session_id as string;
    // 100 events of 100 KB (the hint cap of a session is 100).
    for (let i = 0; i < 10; i++) {
      await call(server, 'POST', `/api/sessions/${id}/events`, {
        events: Array.from({ length: 10 }, () => hint('y'.repeat(100_000))),
      });
    }
    const before = await settledRss(server);
    for (let i = 0; i < maxStreams; i++) {
      await new Promise<void>((resolve, reject) => {
        const request = http.get(
          `${server.url}/api/sessions/${id}/events/stream?after=0`,
          { headers: { authorization: `Bearer ${TOKEN}` }, agent: false },
          (response) => {
            response.pause(); // never read: the server's buffers fill
            resolve();
          },
        );
        request.on('error', reject);
        sockets.push(request);
      });
    }
    const after = await settledRss(server);
    const perStream = (after - before) / maxStreams;
    const serving = (await fetch(`${server.url}/healthz`)).status === 200;
    return {
      name: 'serve-hostile: RSS growth per paused SSE stream (128 streams, 100 events of 100 KB)',
      value: round(perStream / 1024),
      unit: 'KiB',
      target: '≤ the stream budget (256 KiB) + 3 frames (300 KiB); 5,243 KiB before it',
      meets: serving && perStream <= streamBufferBytes + 300 * 1024,
      detail: {
        streams: maxStreams,
        rssBeforeMiB: round(before / MiB),
        rssAfterMiB: round(after / MiB),
        totalGrowthMiB: round((after - before) / MiB),
        streamBudgetKiB: streamBufferBytes / 1024,
      },
    };
  } finally {
    for (const request of sockets) request.destroy();
    await server.stop();
  }
}

/** The `serve-hostile` suite: both attacks, one server process each. */
export async function serveHostile(): Promise<Figure[]> {
  return [await tailAttack(), await pausedReadersAttack()];
}
