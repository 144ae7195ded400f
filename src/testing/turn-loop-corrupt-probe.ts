/**
 * The corrupt-checkpoint probe of the TurnLoop race world (see runTurnLoopRaceProperty): a loop
 * started on truncated or corrupt checkpoint bytes must exit with `CHECKPOINT_CORRUPT`
 * (`[checkpoint-corrupt-exits]`) and leave the bytes in place (`[checkpoint-corrupt-kept]`).
 *
 * @internal
 * @module
 */
import { CheckpointCorruptError } from '../errors.js';
import { createTurnLoop } from '../turn-loop/create-turn-loop.js';
import type { TurnLoopExit } from '../turn-loop/turn-loop-types.js';
import { checkpointId, ownerId, sessionId, type TurnLoopWorld } from './turn-loop-world.js';

/**
 * Overwrites the stored checkpoint with truncated or corrupt bytes, starts a loop on them (it
 * must exit with `CHECKPOINT_CORRUPT` and leave the bytes in place), then puts the checkpoint
 * back as it was: nothing of it may be lost.
 *
 * @returns what it did, for the trace
 */
export async function probeCorruptCheckpoint(
  world: TurnLoopWorld,
  how: 'truncated' | 'corrupt',
): Promise<string> {
  const original = await world.store.load?.({}, checkpointId);
  if (original === undefined) return 'nothing stored';
  const bad =
    how === 'truncated'
      ? original.base.slice(0, Math.floor(original.base.length / 2))
      : new TextEncoder().encode('{"version":1,"unhandled":[');
  await world.store.set({}, checkpointId, bad);
  const probe = createTurnLoop<number>({
    runtime: world.runtime,
    ownerId,
    sessionId,
    store: world.store,
    checkpointId,
    genInput: (items) => ({ input: items, consumed: items }),
    prepareAgent: () => world.agent,
  });
  probe.run();
  let exit: TurnLoopExit<number> | undefined;
  void probe.wait().then((value) => (exit = value));
  for (let round = 0; round < 50 && exit === undefined; round++) await world.clock.advance(1);
  const after = await world.store.get({}, checkpointId);
  if (exit === undefined) {
    world.violation(`[checkpoint-corrupt-exits] a loop on ${how} bytes never exited (50 ms)`);
    probe.stop({ mode: 'immediate' });
  } else if (!(exit.exitReason instanceof CheckpointCorruptError)) {
    world.violation(
      `[checkpoint-corrupt-exits] a loop on ${how} bytes exited with ${String(exit.exitReason)}, not CHECKPOINT_CORRUPT`,
    );
  }
  if (after === undefined || after.join() !== bad.join()) {
    world.violation(`[checkpoint-corrupt-kept] the ${how} checkpoint did not stay in place`);
  }
  await world.store.set({}, checkpointId, original.base);
  for (const patch of original.patches) await world.store.append?.({}, checkpointId, patch);
  return `${how} bytes: ${exit === undefined ? 'no exit' : String((exit.exitReason as { code?: string } | undefined)?.code)}`;
}
