/**
 * Runs `runplane serve` as a child process (node + tsx, as `npm start` does) and talks to it
 * over HTTP. Every wait is for a line of output, a response or an event, never for time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';

/**
 * The `runplane serve` processes of a test file's tests, each started with `--tokens
 * <token>:alice`, and one scratch folder per test: after each test the processes are killed and
 * the folder removed.
 */
export function useServerProcesses(token: string) {
  const started: ServerProcess[] = [];
  let dir: string | undefined;
  afterEach(() => {
    for (const server of started.splice(0)) server.child.kill('SIGKILL');
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });
  return {
    /** Starts a server on `dbPath` with `extra` flags; resolves once it listens. */
    boot: async (dbPath: string, extra: string[] = []) => {
      const server = await spawnServer(['--db', dbPath, '--tokens', `${token}:alice`, ...extra]);
      started.push(server);
      return server;
    },
    /** A new scratch folder for this test, named after `prefix`. */
    scratch: (prefix: string) => (dir = mkdtempSync(join(tmpdir(), prefix))),
  };
}

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Everything the process printed on stdout so far. */
  readonly output: () => string;
  /** Everything the process printed on stderr so far. */
  readonly errors: () => string;
  /** Resolves with the exit code and signal once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `runplane serve` with `args` (and `options.nodeArgs` for node itself, e.g.
 * `--max-old-space-size=256`); resolves once it prints its URL. The process inherits no
 * `RUNPLANE_*` or `OPENAI_*` variable but those in `options.env`.
 *
 * @throws when the process exits before listening (its output is in the message)
 */
export function spawnServer(
  args: readonly string[],
  options: {
    readonly nodeArgs?: readonly string[];
    readonly env?: Readonly<Record<string, string>>;
  } = {},
): Promise<ServerProcess> {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('RUNPLANE_') || name.startsWith('OPENAI_')) delete env[name];
  }
  Object.assign(env, options.env);
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), '--import', 'tsx', 'src/cli.ts', 'serve', '--port', '0', ...args],
    { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk: string) => {
      stdout += chunk;
      const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1];
      if (url !== undefined) {
        resolve({ child, url, output: () => stdout, errors: () => stderr, exited });
      }
    });
    child.stderr.on('data', (chunk: string) => (stderr += chunk));
    void exited.then(({ code, signal }) =>
      reject(new Error(`serve exited (${code ?? signal}) before listening:\n${stdout}\n${stderr}`)),
    );
  });
}

/** A small JSON client for one token. */
export function client(url: string, token: string) {
  return async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
}

/** Reads the SSE stream of a session until an event matches; returns the events read. */
export async function streamUntil(
  url: string,
  token: string,
  sessionId: string,
  done: (event: { seq: number; type: string; run_id: string | null }) => boolean,
): Promise<
  Array<{ seq: number; type: string; run_id: string | null; payload: Record<string, unknown> }>
> {
  const controller = new AbortController();
  const response = await fetch(`${url}/api/sessions/${sessionId}/events/stream?after=0`, {
    headers: { authorization: `Bearer ${token}` },
    signal: controller.signal,
  });
  if (response.body === null) throw new Error('no body');
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const events: Array<{
    seq: number;
    type: string;
    run_id: string | null;
    payload: Record<string, unknown>;
  }> = [];
  let buffer = '';
  for (;;) {
    const { done: ended, value } = await reader.read();
    if (ended) throw new Error('the stream ended first');
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (data === undefined) continue;
      const event = JSON.parse(data) as (typeof events)[number];
      events.push(event);
      if (done(event)) {
        controller.abort();
        return events;
      }
    }
  }
}
