/**
 * Run lifecycle, the tests numbered 13 and 14: a failing agent is a FAILED run, whatever it
 * throws, and bad input is INVALID_ARGUMENT naming the field.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, type Agent, type AgentRun } from '../../src/index.js';
import { createTestRuntime, gatedAgent, owner, waitForCancel } from '../helpers.js';

describe('run lifecycle', () => {
  it('13. an agent error is FAILED with the error; a throwing event listener cannot corrupt a run', async () => {
    const { runtime, reported } = createTestRuntime();
    runtime.onEvent(() => {
      throw new Error('listener bug');
    });
    const boom = new Error('agent exploded');
    const failing: Agent<string, string> = {
      execute: () => Promise.reject(boom),
    };
    const run = runtime.prepare({ ...owner, agent: failing, input: 'x' });
    run.start();
    expect(await run.termination).toEqual({ status: 'FAILED', error: boom });
    await expect(run.result()).rejects.toBe(boom);
    expect(reported.length).toBeGreaterThan(0);
    expect(reported.every((e) => e instanceof Error && e.message === 'listener bug')).toBe(true);

    const ok = runtime.prepare({
      ...owner,
      agent: { execute: async (x: string) => x },
      input: 'next',
    });
    ok.start();
    expect(await ok.result()).toBe('next');
  });

  it('13. a synchronous throw from execute is a FAILED run, not an exception', async () => {
    const { runtime } = createTestRuntime();
    const agent: Agent<string, string> = {
      execute: () => {
        throw new TypeError('sync throw');
      },
    };
    const run = runtime.prepare({ ...owner, agent, input: 'x' });
    run.start();
    expect(await run.termination).toMatchObject({
      status: 'FAILED',
      error: { message: 'sync throw' },
    });
  });

  it('14. bad input is INVALID_ARGUMENT naming the field', () => {
    const { runtime } = createTestRuntime();
    const agent = gatedAgent().agent;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ sessionId: 's', agent, input: 1 }, 'ownerId'],
      [{ ownerId: '', sessionId: 's', agent, input: 1 }, 'ownerId'],
      [{ ownerId: 'o', agent, input: 1 }, 'sessionId'],
      [{ ownerId: 'o', sessionId: 's', input: 1 }, 'agent'],
      [{ ownerId: 'o', sessionId: 's', agent: { run() {} }, input: 1 }, 'agent'],
      [{ ownerId: 'o', sessionId: 's', agent, input: 1, timeoutMs: -5 }, 'timeoutMs'],
      [{ ownerId: 'o', sessionId: 's', agent, input: 1, strategy: 'yolo' }, 'strategy'],
    ];
    for (const [options, field] of cases) {
      expect(() => runtime.prepare(options as never), field).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', field }),
      );
    }
    expect(() => runtime.prepare({ ...cases[5]![0], ownerId: 'o' } as never)).toThrow(
      'INVALID_ARGUMENT: expected `timeoutMs` to be a non-negative number of milliseconds, got -5',
    );
    const run = runtime.prepare({ ownerId: 'o', sessionId: 's', agent, input: 1 });
    expect(() => run.cancel({ mode: 7 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'mode' }),
    );
    expect(() => run.cancel({ mode: CancelMode.AnySafePoint, timeoutMs: Number.NaN })).toThrow(
      expect.objectContaining({ field: 'timeoutMs' }),
    );
    expect(() =>
      runtime.prepare({ ownerId: 'o', sessionId: 's', agent, input: 1, runId: run.id }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'runId' }));
  });
});

describe('an agent that throws anything', () => {
  it('a value String() cannot convert still ends the run FAILED, logged, its nested run cancelled', async () => {
    const { runtime } = createTestRuntime();
    let nested: AgentRun<unknown> | undefined;
    const thrown: unknown = Object.create(null);
    const run = runtime.prepare({
      ownerId: 'alice',
      sessionId: 's1',
      input: null,
      agent: {
        async execute(_input, ctx) {
          nested = ctx.spawn(waitForCancel, null);
          throw thrown;
        },
      },
    });
    run.start();
    expect(await run.termination).toEqual({ status: 'FAILED', error: thrown });
    expect(await nested?.termination).toMatchObject({ status: 'CANCELLED' });
    const failed = (await runtime.eventLog.read({}, { ownerId: 'alice', sessionId: 's1' })).find(
      (e) => e.type === 'run.failed' && e.runId === run.id,
    );
    expect(failed?.payload).toEqual({ error: '[object Object]' });
  });
});
