/**
 * A host shutdown at any step of a TurnLoop race sequence, and the obligations that follow it
 * (see runTurnLoopRaceProperty): the loop is stopped as `runplane serve` stops its loops
 * (graceful, `initiator: 'shutdown'`) and the runtime shuts down; within the grace plus
 * `stopWithinMs` on the simulated clock the loop exits (`[shutdown-loop-exits]`), the
 * shutdown resolves (`[shutdown-resolves]`), every run of the sequence has ended and none is
 * RUNNING (`[shutdown-ends-runs]`), the exit passes the item checks of every exit, and what the
 * store holds loads as the next loop would load it (`[shutdown-checkpoint-loadable]`).
 *
 * @internal
 * @module
 */
import { jsonCheckpointCodec } from '../turn-loop/checkpoint.js';
import { createCheckpointKeeper } from '../turn-loop/checkpoint-keeper.js';
import { checkpointId, ownerId, type TurnLoopWorld } from './turn-loop-world.js';

/**
 * Shuts the world's host down now and checks what must follow.
 *
 * @param graceMs - the loop's graceful-stop grace and the runtime's shutdown grace, in ms
 * @param releaseAll - releases every settlement the scheduler holds (none: they stay held, and
 *   the runtime must still end every run, abandoning agents after `unwindTimeoutMs`)
 * @returns what happened, for the trace
 */
export async function shutdownHost(
  world: TurnLoopWorld,
  graceMs: number,
  releaseAll?: () => Promise<void>,
): Promise<string> {
  world.shutDown = true;
  const generation = world.current;
  const startedAt = world.clock.now();
  const boundAt = startedAt + graceMs + world.settings.stopWithinMs;
  generation.stopped = true;
  generation.loop.stop({ mode: 'graceful', graceMs, cause: 'shutdown', initiator: 'shutdown' });
  let result: { drained: boolean } | undefined;
  void world.runtime.shutdown({ graceMs }).then(
    (value) => (result = value),
    (error: unknown) => world.reported.push(error),
  );
  const done = () => result !== undefined && generation.exit !== undefined;
  for (let round = 0; round < 100 && !done(); round++) {
    if (releaseAll !== undefined) await releaseAll();
    await world.clock.flush();
    const next = world.clock.nextTimerAt;
    if (done() || next === undefined || next > boundAt) break;
    await world.clock.advance(Math.max(0, next - world.clock.now()));
  }
  const within = `within ${graceMs} ms of grace + ${world.settings.stopWithinMs} ms`;
  if (generation.exit === undefined) {
    world.violation(`[shutdown-loop-exits] loop ${generation.index} did not exit ${within}`);
  }
  if (result === undefined)
    world.violation(`[shutdown-resolves] shutdown() did not resolve ${within}`);
  const live = world
    .knownRuns()
    .flatMap(({ runId, sessionId }) => world.runtime.runs.find(ownerId, sessionId, runId) ?? []);
  if (live.length > 0 || world.runtime.runs.size !== 0) {
    world.violation(
      `[shutdown-ends-runs] ${within}, runs still live: ${live.map((run) => `${run.id} (${run.status})`).join(', ') || `${world.runtime.runs.size} unknown`}`,
    );
  }
  await world.closeGeneration(generation);
  const keeper = createCheckpointKeeper({
    store: world.store,
    checkpointId,
    codec: jsonCheckpointCodec,
    incremental: true,
    compactAfterPatches: Number.POSITIVE_INFINITY,
  });
  let loaded: string;
  try {
    const checkpoint = await keeper.load();
    loaded =
      checkpoint === undefined
        ? 'no checkpoint'
        : `checkpoint [${[...checkpoint.interrupted, ...checkpoint.unhandled].join(', ')}]`;
  } catch (error) {
    loaded = 'an unloadable checkpoint';
    world.violation(
      `[shutdown-checkpoint-loadable] after the shutdown the stored checkpoint does not load: ${String(error)}`,
    );
  }
  return `${world.clock.now() - startedAt} ms to exit, ${loaded}`;
}
