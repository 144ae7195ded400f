/**
 * The IdempotencyKeys contract (the IETF Idempotency-Key draft, §9 of docs/architecture.md):
 * one suite, run against memory, SQLite and the cluster's Redis store.
 */
import { describe, expect, it } from 'vitest';
import type { BeginIdempotentRequest, IdempotencyKeys } from '../../src/stores/idempotency-keys.js';
import { useStoreHarness, type StoreHarness } from './record-store-contract.js';

const request = (changes: Partial<BeginIdempotentRequest> = {}): BeginIdempotentRequest => ({
  ownerId: 'alice',
  key: 'k1',
  fingerprint: 'POST /sessions {}',
  at: 1_000,
  ttlMs: 10_000,
  lockMs: 100,
  maxKeysPerOwner: 3,
  ...changes,
});

/** Runs the contract against the harnesses `open` makes (one per test). */
export function describeIdempotencyKeysContract(
  name: string,
  open: () => Promise<StoreHarness<IdempotencyKeys>>,
): void {
  describe(`IdempotencyKeys contract: ${name}`, () => {
    const setup = useStoreHarness(open);

    it('claims a free key, holds it while in progress, replays its answer, refuses reuse', async () => {
      const keys = await setup();
      expect(await keys.begin(request())).toEqual({ outcome: 'claimed' });
      expect(await keys.begin(request({ at: 1_050 }))).toEqual({
        outcome: 'in_progress',
        lockedUntil: 1_100,
      });
      const body = JSON.stringify({
        ids: [],
        big: 12345678901234567890n.toString(),
        n: 2 ** 53 - 1,
      });
      await keys.complete('alice', 'k1', { status: 201, body });
      const replay = await keys.begin(request({ at: 2_000 }));
      expect(replay).toMatchObject({ outcome: 'answered', answer: { status: 201, body } });
      expect(await keys.begin(request({ fingerprint: 'other' }))).toEqual({ outcome: 'reused' });
      expect(await keys.begin(request({ ownerId: 'bob' }))).toEqual({ outcome: 'claimed' });
    });

    it('re-claims a claim whose lock passed; the first answer wins', async () => {
      const keys = await setup();
      await keys.begin(request());
      expect(await keys.begin(request({ at: 1_100 }))).toEqual({ outcome: 'claimed' });
      expect(await keys.begin(request({ at: 1_150 }))).toEqual({
        outcome: 'in_progress',
        lockedUntil: 1_200,
      });
      await keys.complete('alice', 'k1', { status: 200, body: '"first"' });
      await keys.complete('alice', 'k1', { status: 201, body: '"second"' });
      expect(await keys.begin(request({ at: 1_300 }))).toMatchObject({
        outcome: 'answered',
        answer: { status: 200, body: '"first"' },
      });
    });

    it('counts live keys per owner; expired keys are forgotten and free their slot', async () => {
      const keys = await setup();
      for (const [key, at] of [
        ['a', 1_000],
        ['b', 2_000],
        ['c', 3_000],
      ] as const) {
        expect(await keys.begin(request({ key, at }))).toEqual({ outcome: 'claimed' });
      }
      expect(await keys.begin(request({ key: 'd', at: 3_000 }))).toEqual({ outcome: 'full' });
      expect(await keys.begin(request({ ownerId: 'bob', key: 'd', at: 3_000 }))).toEqual({
        outcome: 'claimed',
      });
      // At 11_000 key `a` (created at 1_000, ttl 10_000) has expired.
      expect(await keys.begin(request({ key: 'd', at: 11_000 }))).toEqual({ outcome: 'claimed' });
      expect(await keys.begin(request({ key: 'a', at: 11_000, fingerprint: 'new' }))).toEqual({
        outcome: 'full',
      });
    });

    it('release forgets an unanswered claim; forgetSession forgets the answers about a session', async () => {
      const keys = await setup();
      await keys.begin(request({ key: 'k1' }));
      await keys.release('alice', 'k1');
      expect(await keys.begin(request({ key: 'k1', fingerprint: 'other' }))).toEqual({
        outcome: 'claimed',
      });
      await keys.begin(request({ key: 'k2' }));
      await keys.complete('alice', 'k2', { status: 201, body: '{}', sessionId: 's1' });
      await keys.begin(request({ key: 'k3' }));
      await keys.complete('alice', 'k3', { status: 201, body: '{}', sessionId: 's2' });
      await keys.forgetSession('alice', 's1');
      expect(await keys.begin(request({ key: 'k2', at: 1_200 }))).toEqual({ outcome: 'claimed' });
      expect(await keys.begin(request({ key: 'k3', at: 1_200 }))).toMatchObject({
        outcome: 'answered',
      });
    });
  });
}
