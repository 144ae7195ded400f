/**
 * The demo behind `runplane demo`: one session, a few runs, and the
 * controls runplane exists for, printed as the session's event log.
 *
 * @module
 */
import { CancelMode } from '../machines/cancel-request.js';
import { sleep } from './clock.js';
import type { RunplaneEvent } from './events/event-log.js';
import type { Agent } from './run/agent.js';
import { createRuntime } from './runtime/create-runtime.js';

/** A toy agent: "thinks" in steps of `stepMs`, reports safe points, honours interrupts. */
function createToyAgent(steps: number, stepMs: number): Agent<string, string> {
  return {
    async execute(question, ctx) {
      const words: string[] = [];
      for (let step = 1; step <= steps; step++) {
        await sleep(ctx.clock, stepMs, ctx.signal);
        if (ctx.interruptRequested) {
          return `(interrupted after ${words.length} steps: ${ctx.interruptMessage ?? 'no reason'})`;
        }
        words.push(`step${step}`);
        ctx.emit('agent.message_delta', { text: `step${step} ` });
        ctx.safePoint(step % 2 === 0 ? 'afterToolCalls' : 'afterChatModel');
      }
      return `answer to "${question}": ${words.join(' ')}`;
    },
  };
}

/**
 * Runs the demo and writes its log to `write`.
 *
 * @param options - `stepMs`: the toy agent's step time in ms (default 150); `write`: output sink
 * @returns the number of events logged
 */
export async function runDemo(
  options: { stepMs?: number; write?: (line: string) => void } = {},
): Promise<number> {
  const write = options.write ?? ((line: string) => console.log(line));
  const stepMs = options.stepMs ?? 150;
  const runtime = createRuntime();
  const key = { ownerId: 'demo-user', sessionId: 'demo-session' };
  const stop = runtime.onEvent((event: RunplaneEvent) => {
    const payload =
      Object.keys(event.payload).length > 0 ? ` ${JSON.stringify(event.payload)}` : '';
    write(`#${event.seq} ${event.runId?.slice(0, 6) ?? '-'} ${event.type}${payload}`);
  });
  const agent = createToyAgent(6, stepMs);
  const prepare = (input: string) => runtime.prepare({ ...key, agent, input });

  write('1. Three messages in one session: the second and third queue behind the first.');
  const [first, second, third] = [prepare('first'), prepare('second'), prepare('third')];
  for (const run of [first, second, third]) run.start();

  write('2. The user cancels the second (queued) message: the others are untouched.');
  second.cancel({ reason: 'user clicked cancel' });

  await sleep(runtime.clock, stepMs * 2.5);
  write('3. The user presses stop on the first: it is interrupted and wraps up.');
  runtime.session(key.ownerId, key.sessionId).interrupt('user pressed stop');
  write(`   first → ${JSON.stringify(await first.termination)}`);

  await sleep(runtime.clock, stepMs * 0.5);
  write('4. The third is cancelled at its next safe point (AfterToolCalls).');
  const cancel = third.cancel({ mode: CancelMode.AfterToolCalls, timeoutMs: stepMs * 10 });
  write(`   third → cancel ${await cancel.outcome}, ${JSON.stringify(await third.termination)}`);

  const { drained } = await runtime.shutdown({ graceMs: 1_000 });
  stop();
  const count = runtime.eventLog.lastSeq({}, key);
  write(`5. Shutdown drained: ${drained}. ${count} events logged.`);
  return count;
}
