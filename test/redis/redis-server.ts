/**
 * A private, real `redis-server` per test file: Debian's binary on a free loopback port, no
 * persistence, stopped after the file. Tests never touch the shared Redis on 6379 (its
 * contents are not theirs) and never use a mock: fencing depends on real Lua atomicity and
 * real key expiry (docs/architecture.md, "Cluster").
 *
 * Outside CI the Redis tests are skipped, with a notice, where `redis-server` is missing; in
 * CI they run and fail instead (`.ci/run` installs it).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll } from 'vitest';

/** The binary the tests start; `REDIS_SERVER` overrides it. */
const binary = process.env.REDIS_SERVER ?? 'redis-server';

function binaryWorks(): boolean {
  const probe = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 && /Redis server v=7\./.test(probe.stdout);
}

/** Skipped where Redis 7's `redis-server` is missing, except in CI, where the tests run and fail. */
export const skipRedis = process.env.CI === undefined && !binaryWorks();
if (skipRedis) {
  console.warn(
    `[redis tests skipped] ${binary} (Redis 7) is missing; install it with: apt-get install -y redis-server (CI never skips)`,
  );
}

/** A running private Redis: its URL, its port and a way to stop it. */
export interface PrivateRedis {
  /** `redis://127.0.0.1:<port>/0`. */
  readonly url: string;
  readonly port: number;
  /** The server process (tests may `SIGSTOP` it to freeze Redis itself). */
  readonly process: ChildProcess;
  /** Stops the server and waits until it has exited. */
  stop(): Promise<void>;
}

/** A free loopback TCP port, found by binding port 0 and closing. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts `redis-server` on a free loopback port with persistence off, and resolves once it
 * says it accepts connections (its own readiness line, not a sleep).
 *
 * @throws Error when the server exits or prints no readiness line within `startTimeoutMs`
 */
export async function startPrivateRedis(startTimeoutMs = 20_000): Promise<PrivateRedis> {
  // A port found free can be taken before the server binds it: try a few.
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    try {
      return await launch(port, startTimeoutMs);
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }
}

function launch(port: number, startTimeoutMs: number): Promise<PrivateRedis> {
  const child = spawn(
    binary,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'yes',
      '--loglevel',
      'notice',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(
        new Error(`redis-server on port ${port} was not ready in ${startTimeoutMs} ms:\n${output}`),
      );
    }, startTimeoutMs);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve({ url: `redis://127.0.0.1:${port}/0`, port, process: child, stop });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new Error(
          `redis-server on port ${port} exited (${code ?? signal}) before it was ready:\n${output}`,
        ),
      );
    });
  });
}

/**
 * One private Redis for the calling test file, started before its tests and stopped after.
 * Call it at the top level of a `describe.skipIf(skipRedis)` block.
 *
 * @returns a getter: the running server (throws when read before `beforeAll` ran)
 */
export function usePrivateRedis(): () => PrivateRedis {
  let redis: PrivateRedis | undefined;
  beforeAll(async () => {
    redis = await startPrivateRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  return () => {
    if (redis === undefined) throw new Error('the private redis-server is not started yet');
    return redis;
  };
}
