/**
 * Benchmarks of `runplane serve` (issue 5), on loopback. The server runs as its own process
 * (`node --import tsx src/cli.ts serve`, as `npm start` does) on a fresh SQLite file, with the
 * default demo agent; the bench process is the client (node:http, keep-alive).
 * - POST user.message → the first SSE frame `session.run_started` of that run (p50 ≤ 5 ms);
 * - 100 concurrent SSE clients on one session each receive every event, in order;
 * - 1,000 sessions × 5 messages through HTTP with nothing lost.
 * Never part of `npm test`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { percentile, round, type Figure } from './core.bench.js';

const TOKEN = 'bench-token-1';
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface Server {
  readonly url: string;
  stop(): Promise<void>;
}

/** Starts `runplane serve` in its own process; resolves once it listens. */
/**
 * The URL `runplane serve` (a child process) prints once it listens.
 *
 * @param child - the server process, its stdout piped
 * @param exited - resolves when the process exits
 * @throws Error with the process's output if it exits before it listens
 */
export function listeningUrl(child: ChildProcess, exited: Promise<void>): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const found = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (found !== undefined) resolve(found);
    });
    void exited.then(() => reject(new Error(`serve exited before listening:\n${out}`)));
  });
}

async function startServerProcess(args: string[]): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-bench-'));
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli.ts',
      'serve',
      '--port',
      '0',
      '--db',
      join(dir, 'runplane.db'),
      '--tokens',
      `${TOKEN}:bench`,
      // One token stands for many users here: the per-owner caps would measure themselves.
      '--rate-limit',
      '1000000',
      '--rate-burst',
      '1000000',
      '--max-running-runs-per-owner',
      '1000000',
      ...args,
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await listeningUrl(child, exited);
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function request(server: Server, method: string, path: string, body?: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${path}`, { method, headers, agent }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (data += chunk));
      res.on('end', () => {
        if ((res.statusCode ?? 500) >= 400)
          reject(new Error(`${method} ${path}: ${res.statusCode} ${data}`));
        else resolve(JSON.parse(data));
      });
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const createSession = async (server: Server) =>
  ((await request(server, 'POST', '/api/sessions', {})) as { session_id: string }).session_id;

const postEvents = async (server: Server, sessionId: string, events: unknown[]) =>
  (
    (await request(server, 'POST', `/api/sessions/${sessionId}/events`, { events })) as {
      results: Array<{ run_id: string }>;
    }
  ).results;

interface Frame {
  readonly seq: number;
  readonly type: string;
  readonly runId: string | null;
  /** performance.now() when the frame was read. */
  readonly at: number;
}

/** Opens an SSE stream (its own connection) and reports every event frame. */
function openStream(
  server: Server,
  sessionId: string,
  onFrame: (frame: Frame) => void,
): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${server.url}/api/sessions/${sessionId}/events/stream?after=0`,
      { headers, agent: false },
      (res) => {
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = performance.now();
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = /^data: (.*)$/m.exec(frame)?.[1];
            if (data === undefined) continue;
            const event = JSON.parse(data) as { seq: number; type: string; run_id: string | null };
            onFrame({ seq: event.seq, type: event.type, runId: event.run_id, at });
          }
        });
        res.on('error', () => undefined);
        resolve(() => req.destroy());
      },
    );
    req.on('error', (error) => (req.destroyed ? undefined : reject(error)));
  });
}

/** A promise resolved by the first frame matching `test`. */
function frameWaiter() {
  const waiting: Array<{ test: (f: Frame) => boolean; resolve: (f: Frame) => void }> = [];
  const seen: Frame[] = [];
  return {
    onFrame(frame: Frame) {
      seen.push(frame);
      for (const w of [...waiting]) {
        if (w.test(frame)) {
          waiting.splice(waiting.indexOf(w), 1);
          w.resolve(frame);
        }
      }
    },
    next(test: (f: Frame) => boolean): Promise<Frame> {
      const already = seen.find(test);
      if (already !== undefined) return Promise.resolve(already);
      return new Promise((resolve) => waiting.push({ test, resolve }));
    },
  };
}

/**
 * POST user.message → the first SSE frame session.run_started of that run. Each sample's run
 * is then stopped by its run_id, so the next message is admitted at once. Samples rotate over
 * `sessionCount` sessions, each followed by its own SSE client, so that no session's history
 * (which the agent loads when a run starts) grows past a realistic chat.
 */
export async function messageToFirstFrame(samples = 500, sessionCount = 20): Promise<Figure> {
  const server = await startServerProcess([]);
  const frames = frameWaiter();
  const sessions: string[] = [];
  const closers: Array<() => void> = [];
  for (let i = 0; i < sessionCount; i++) {
    const sessionId = await createSession(server);
    sessions.push(sessionId);
    closers.push(await openStream(server, sessionId, (f) => frames.onFrame(f)));
  }
  const latencies: number[] = [];
  for (let i = 0; i < samples + 50; i++) {
    const sessionId = sessions[i % sessionCount] ?? '';
    const t0 = performance.now();
    const [result] = await postEvents(server, sessionId, [
      { type: 'user.message', payload: { text: `message ${i}` } },
    ]);
    const runId = result?.run_id ?? '';
    const started = await frames.next((f) => f.type === 'session.run_started' && f.runId === runId);
    if (i >= 50) latencies.push(started.at - t0);
    await postEvents(server, sessionId, [{ type: 'user.interrupt', payload: { run_id: runId } }]);
    await frames.next((f) => f.type === 'run.cancelled' && f.runId === runId);
  }
  for (const close of closers) close();
  await server.stop();
  const p50 = percentile(latencies, 0.5);
  return {
    name: 'serve: POST user.message → first SSE frame session.run_started, p50',
    value: round(p50),
    unit: 'ms',
    target: '≤ 5 ms',
    meets: p50 <= 5,
    detail: {
      p90Ms: round(percentile(latencies, 0.9)),
      p99Ms: round(percentile(latencies, 0.99)),
      samples,
      sessions: sessionCount,
    },
  };
}

/** 100 SSE clients on one session; 10 long demo replies streamed at full speed. */
export async function fanOut(clients = 100, messages = 10): Promise<Figure> {
  const server = await startServerProcess(['--chunk-delay-ms', '0']);
  const sessionId = await createSession(server);
  const seen: number[][] = Array.from({ length: clients }, () => []);
  const watcher = frameWaiter();
  const closers = await Promise.all(
    seen.map((list, i) =>
      openStream(server, sessionId, (frame) => {
        list.push(frame.seq);
        if (i === 0) watcher.onFrame(frame);
      }),
    ),
  );
  const t0 = performance.now();
  const runIds: string[] = [];
  for (let i = 0; i < messages; i++) {
    const [result] = await postEvents(server, sessionId, [
      { type: 'user.message', payload: { text: `message ${i}` } },
    ]);
    runIds.push(result?.run_id ?? '');
  }
  const last = runIds.at(-1);
  await watcher.next((f) => f.type === 'run.completed' && f.runId === last);
  const session = (await request(server, 'GET', `/api/sessions/${sessionId}`)) as {
    last_seq: number;
  };
  const lastSeq = session.last_seq;
  const deadline = performance.now() + 60_000;
  while (seen.some((list) => list.at(-1) !== lastSeq) && performance.now() < deadline) {
    await delay(2);
  }
  const elapsedMs = performance.now() - t0;
  for (const close of closers) close();
  await server.stop();
  const complete = seen.filter(
    (list) => list.length === lastSeq && list.every((seq, i) => seq === i + 1),
  ).length;
  return {
    name: `serve: ${clients} SSE clients on one session, each receives every event in order`,
    value: complete,
    unit: `of ${clients} clients`,
    target: `${clients} of ${clients}`,
    meets: complete === clients,
    detail: {
      eventsPerClient: lastSeq,
      framesDelivered: seen.reduce((sum, list) => sum + list.length, 0),
      elapsedMs: round(elapsedMs),
      framesPerSecond: Math.round((clients * lastSeq) / (elapsedMs / 1_000)),
    },
  };
}

/** 1,000 sessions × 5 messages (the calculator path), 64 requests in flight; then everything is counted. */
export async function manySessions(
  sessions = 1_000,
  perSession = 5,
  inFlight = 64,
): Promise<Figure> {
  const server = await startServerProcess(['--chunk-delay-ms', '0']);
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < sessions; i += inFlight) {
    const batch = Array.from({ length: Math.min(inFlight, sessions - i) }, () =>
      createSession(server),
    );
    ids.push(...(await Promise.all(batch)));
  }
  const jobs = ids.flatMap((id) => Array.from({ length: perSession }, (_, m) => [id, m] as const));
  const runIds: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < jobs.length) {
        const [id, m] = jobs[next++]!;
        const [result] = await postEvents(server, id, [
          { type: 'user.message', payload: { text: `what is ${m} + ${m}?` } },
        ]);
        runIds.push(result?.run_id ?? '');
      }
    }),
  );
  const sentMs = performance.now() - t0;
  // Wait until every session is idle again.
  for (const id of ids) {
    for (;;) {
      const session = (await request(server, 'GET', `/api/sessions/${id}`)) as { status: string };
      if (session.status === 'idle') break;
      await delay(5);
    }
  }
  const elapsedMs = performance.now() - t0;
  // Nothing lost: every run COMPLETED with the right answer; every session's log is whole.
  let completedRuns = 0;
  let intactSessions = 0;
  let events = 0;
  for (const id of ids) {
    const page = (await request(server, 'GET', `/api/sessions/${id}/events?limit=1000`)) as {
      events: Array<{ seq: number; type: string }>;
    };
    events += page.events.length;
    const messages = page.events.filter((e) => e.type === 'user.message').length;
    const done = page.events.filter((e) => e.type === 'run.completed').length;
    const contiguous = page.events.every((e, i) => e.seq === i + 1);
    if (messages === perSession && done === perSession && contiguous) intactSessions++;
  }
  for (const runId of runIds) {
    const run = (await request(server, 'GET', `/api/runs/${runId}`)) as {
      status: string;
      input: string;
      outcome: { reply?: string } | null;
    };
    const m = /what is (\d+) \+/.exec(run.input)?.[1];
    if (run.status === 'COMPLETED' && run.outcome?.reply === `${m} + ${m} = ${2 * Number(m)}.`) {
      completedRuns++;
    }
  }
  await server.stop();
  const total = sessions * perSession;
  return {
    name: `serve: ${sessions} sessions × ${perSession} messages through HTTP, nothing lost`,
    value: completedRuns,
    unit: `of ${total} runs completed correctly`,
    target: `${total} of ${total}, every session's log whole`,
    meets: completedRuns === total && intactSessions === sessions && runIds.length === total,
    detail: {
      intactSessions,
      eventsLogged: events,
      sendPhaseMs: round(sentMs),
      elapsedMs: round(elapsedMs),
      runsPerSecond: Math.round(total / (elapsedMs / 1_000)),
    },
  };
}
