/**
 * Test helper: `runplane serve` servers on real sockets under a test file's global in-memory
 * span exporter (`createSpanRecorder`), each on a scratch database; after each test they are
 * shut down and their folders removed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startServer, type RunningServer, type ServeOptions } from '../../src/server/serve.js';
import { createSpanRecorder } from './span-recorder.js';

export function useObservedServers() {
  const recorder = createSpanRecorder();
  beforeAll(() => trace.setGlobalTracerProvider(recorder.provider));
  afterAll(() => trace.disable());
  const started: RunningServer[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    // shutdown() is idempotent: a test may have shut its server down already.
    for (const server of started.splice(0)) await server.shutdown({ graceMs: 0 });
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  /** Starts a server on port 0 and a scratch database, with `options`. */
  const start = async (options: ServeOptions): Promise<RunningServer> => {
    const dir = mkdtempSync(join(tmpdir(), 'runplane-obs-'));
    dirs.push(dir);
    const server = await startServer({ port: 0, dbPath: join(dir, 'runplane.db'), ...options });
    started.push(server);
    return server;
  };
  return { recorder, start };
}
