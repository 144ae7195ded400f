/**
 * The embedded default holds bounded memory (issue 14, defect 8): `createRuntime()` with its
 * default stores, 1,000,000 runs over 100,000 sessions (10 each). Reported: the heap after GC
 * once the idle session actors were evicted, and its growth per session between the first and
 * the second half (what each session leaves: its last `seq`). Never part of `npm test`.
 */
import { SimulatedClock } from 'xstate';
import { createRuntime } from '../src/index.js';
import { noop, round, type Figure } from './core.bench.js';

const MiB = 1024 * 1024;

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('run with node --expose-gc (npm run bench does)');
  collect();
  collect();
}

/** Heap after 1,000,000 runs over 100,000 sessions, and its growth per session. */
export async function embeddedRetention(): Promise<Figure> {
  // Default options but the clock: simulated, so the minute after which an idle session actor
  // is evicted (`sessionIdleTtlMs`) passes at once; what stays is what the stores keep.
  const clock = new SimulatedClock();
  const runtime = createRuntime({ clock });
  const sessions = 100_000;
  const runsPerSession = 10;
  const settle = () => {
    clock.increment(61_000);
    gc();
    return process.memoryUsage().heapUsed;
  };
  const runHalf = async (from: number, to: number) => {
    for (let round = 0; round < runsPerSession; round++) {
      for (let chunk = from; chunk < to; chunk += 1_000) {
        const pending = [];
        for (let s = chunk; s < Math.min(chunk + 1_000, to); s++) {
          const run = runtime.prepare({
            ownerId: 'bench',
            sessionId: `s${s}`,
            agent: noop,
            input: s,
          });
          run.start();
          pending.push(run.termination);
        }
        await Promise.all(pending);
      }
    }
  };
  const start = settle();
  const t0 = performance.now();
  await runHalf(0, sessions / 2);
  const half = settle();
  await runHalf(sessions / 2, sessions);
  const end = settle();
  const seconds = (performance.now() - t0) / 1_000;
  const perSession = (end - half) / (sessions / 2);
  await runtime.shutdown({ graceMs: 0 });
  return {
    name: 'embedded createRuntime(): heap after GC following 1,000,000 runs over 100,000 sessions',
    value: round((end - start) / MiB),
    unit: 'MiB',
    target: 'bounded: ≤ 64 MiB, and ≤ 256 B more per session',
    meets: end - start <= 64 * MiB && perSession <= 256,
    detail: {
      growthPerSessionBytes: round(perSession),
      heapAfter50000SessionsMiB: round((half - start) / MiB),
      runsPerSecond: Math.round((sessions * runsPerSession) / seconds),
    },
  };
}
