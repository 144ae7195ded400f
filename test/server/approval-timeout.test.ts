/**
 * Approval timeouts: a tool call nobody confirms is denied with reason `timeout` once its
 * session's `approval_timeout_ms` has passed on the (simulated) clock, and the run goes on.
 */
import { z } from 'zod';
import { afterEach, describe, expect, it } from 'vitest';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import { createTestService, flush } from './helpers.js';

let t: ReturnType<typeof createTestService> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** A ReAct agent whose model calls a tool that needs approval, then answers with its result. */
function agentNeedingApproval() {
  let executed = 0;
  const risky = defineTool({
    name: 'risky',
    description: 'Needs a yes first',
    parameters: z.object({}),
    needsApproval: true,
    execute: () => {
      executed++;
      return 'ran';
    },
  });
  const model = createScriptedModel([
    { toolCalls: [{ id: 'toolu_1', name: 'risky', args: {} }] },
    (request) => ({
      text: `after: ${String(request.messages.at(-1)?.content).slice(0, 60)}`,
    }),
  ]);
  return {
    agent: createReActAgent({ model, tools: [risky] }),
    executed: () => executed,
  };
}

describe('approval timeout', () => {
  it("denies the call with reason timeout after the session's approval_timeout_ms; the run completes", async () => {
    const built = agentNeedingApproval();
    t = createTestService({ agent: built.agent });
    const id = await t.createSession({ approval_timeout_ms: 5_000 });
    const runId = await t.send(id, 'do it');
    await t.waitForEvent(id, (e) => e.type === 'agent.approval_requested');
    t.clock.increment(4_999);
    await flush();
    const session = await t.json(await t.request('GET', `/api/sessions/${id}`));
    expect(session.pending_approvals).toEqual([
      expect.objectContaining({ tool_use_id: 'toolu_1' }),
    ]);
    t.clock.increment(1);
    const resolved = await t.waitForEvent(id, (e) => e.type === 'agent.approval_resolved');
    expect(resolved.payload).toEqual({
      tool_use_id: 'toolu_1',
      outcome: 'denied',
      reason: 'timeout',
      message: 'no answer within 5000 ms',
    });
    const completed = await t.waitForEvent(id, (e) => e.type === 'run.completed');
    expect(completed.runId).toBe(runId);
    const result = await t.waitForEvent(id, (e) => e.type === 'agent.tool_result');
    expect(result.payload).toMatchObject({ status: 'denied' });
    expect(built.executed()).toBe(0);
    expect(t.reported).toEqual([]);
  });

  it('defaults to the service default (10 minutes), and an answer in time clears the timer', async () => {
    const built = agentNeedingApproval();
    t = createTestService({ agent: built.agent });
    const id = await t.createSession();
    expect((await t.json(await t.request('GET', `/api/sessions/${id}`))).approval_timeout_ms).toBe(
      600_000,
    );
    await t.send(id, 'do it');
    await t.waitForEvent(id, (e) => e.type === 'agent.approval_requested');
    t.clock.increment(599_999);
    await flush();
    expect(t.runtime.pendingApprovals('alice', id)).toHaveLength(1);
    const answered = await t.post(id, [
      { type: 'user.tool_confirmation', payload: { tool_use_id: 'toolu_1', allow: true } },
    ]);
    expect(answered.status).toBe(200);
    await t.waitForEvent(id, (e) => e.type === 'run.completed');
    t.clock.increment(10_000); // the timer was cleared: nothing more happens
    await flush();
    const resolved = (await t.events(id)).filter((e) => e.type === 'agent.approval_resolved');
    expect(resolved.map((e) => e.payload.reason)).toEqual(['user']);
    expect(built.executed()).toBe(1);
  });

  it('PATCH changes a session’s approval timeout; a bad one is 400', async () => {
    t = createTestService();
    const id = await t.createSession();
    const patched = await t.request('PATCH', `/api/sessions/${id}`, {
      body: { approval_timeout_ms: 1_000 },
    });
    expect((await t.json(patched)).approval_timeout_ms).toBe(1_000);
    for (const bad of [0, -1, 1.5, 86_400_001, '5']) {
      const response = await t.request('PATCH', `/api/sessions/${id}`, {
        body: { approval_timeout_ms: bad },
      });
      expect([bad, response.status]).toEqual([bad, 400]);
    }
  });
});
