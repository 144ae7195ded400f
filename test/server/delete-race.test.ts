/**
 * A message whose body is still arriving when its session is deleted: the session was found
 * before the body was read, but the deletion wins. No run starts on a deleted session (none
 * could stop it), and nothing of it is left in the database.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { deferred, gatedAgent } from '../helpers.js';
import { ALICE, createTestService } from './helpers.js';

let t: ReturnType<typeof createTestService> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** A request body sent in two parts; `reading` resolves once the server has begun to read it. */
function slowBody(text: string) {
  const bytes = new TextEncoder().encode(text);
  const reading = deferred<void>();
  let sent = 0;
  let rest: (() => void) | undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        reading.resolve();
        if (sent === 0) {
          sent = 5;
          controller.enqueue(bytes.slice(0, 5));
          return;
        }
        return new Promise<void>((resolve) => {
          rest = () => {
            controller.enqueue(bytes.slice(5));
            controller.close();
            resolve();
          };
        });
      },
    },
    { highWaterMark: 0 },
  );
  return { body, length: bytes.length, reading: reading.promise, finish: () => rest?.() };
}

describe('a message racing the deletion of its session', () => {
  for (const type of ['user.message', 'user.supplement']) {
    it(`${type}: the body completes after the DELETE answered, and the answer is 404`, async () => {
      const gate = gatedAgent<{ reply: string }>();
      t = createTestService({ agent: gate.agent });
      const id = await t.createSession();
      const slow = slowBody(JSON.stringify({ events: [{ type, payload: { text: 'late' } }] }));
      const answer = t.service.app.request(`/api/sessions/${id}/events`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ALICE}`,
          'content-type': 'application/json',
          'content-length': String(slow.length),
        },
        body: slow.body,
        duplex: 'half',
      } as RequestInit);
      await slow.reading; // the session was found; its body is being read
      expect((await t.request('DELETE', `/api/sessions/${id}`)).status).toBe(204);
      slow.finish();
      const late = await answer;
      expect(late.status).toBe(404);
      expect(((await late.json()) as { error: { code: string } }).error.code).toBe('not_found');
      expect(gate.executions).toHaveLength(0);
      expect(await t.events(id)).toEqual(
        expect.not.arrayContaining([expect.objectContaining({ type: 'user.message' })]),
      );
    });
  }
});
