/**
 * Hop timestamps of the commands one instance sends and applies, for the cluster bench only
 * (docs/architecture.md, "Cluster on Redis": the path of a command held elsewhere). Off unless
 * the process starts with `RUNPLANE_TRACE_COMMANDS=1`; then each hop is one stderr line,
 * `runplane trace <id> <hop> <wall ms>` (`performance.timeOrigin + performance.now()`, so sub-ms
 * and comparable across the processes of one host), where `<id>` is the command's request id,
 * or `s:<sessionId>` for a hop that knows only its session (a nudge).
 *
 * @module
 * @internal
 */

const enabled = process.env.RUNPLANE_TRACE_COMMANDS === '1';

/** @internal The wall time now in ms, with sub-ms precision. */
export const traceNow = (): number => performance.timeOrigin + performance.now();

/** @internal Notes that command `id` reached `hop` (at `at`, or now); a no-op unless enabled. */
export function traceCommand(id: string, hop: string, at: number = traceNow()): void {
  if (!enabled) return;
  process.stderr.write(`runplane trace ${id} ${hop} ${at.toFixed(3)}\n`);
}
