/**
 * The timeline trace format: one lifecycle transition of one actor per JSON line (docs/architecture.md, "Inspection").
 *
 * @remarks
 * A line reads `{ t, actor, id, parentId, from, to, event, cause }`:
 * - `t`: clock time of the transition in ms (the runtime's clock; `SimulatedClock` starts at 0);
 * - `actor`: `'run' | 'session' | 'turn-loop'`, the kind of actor (machine ids `run`, `session`,
 *   `turnLoop`);
 * - `id`: the run id, the session key `ownerId/sessionId`, or the turn loop's id (its
 *   `checkpointId`, else `turn-loop-<n>`); a loop's `parentId` is its session key;
 * - `parentId`: for a top-level run its session key (runs are root actors, not XState children,
 *   see README "Design notes"); for a nested run its parent run id; `null` for a session;
 * - `from` / `to`: state paths joined with dots (`QUEUED`, `CANCELLED.unwinding`,
 *   `CANCELLED.unwinding`); `from` is `null` on the actor's first line;
 * - `event`: the XState event type that caused it (`run.cancel`, `xstate.init`, …);
 * - `cause`: why, when the event alone does not say it: `cancel | preempt | timeout | signal |
 *   shutdown | interrupt | escalation | interrupted | unwind_timeout`, and for a turn loop
 *   `push | preempt | late | stop | <stop cause> | handler | error | checkpoint`, else `null`.
 *
 * On disk a trace is compact: `null` fields are left out, and `parentId`, which never changes, is
 * written only on an actor's first line (the one with `from: null`); {@link parseTimelineTrace}
 * puts both back. `from === to` marks a transition that changed no state but matters (an
 * interrupt, a cancel request merged into a pending one).
 *
 * @module
 */
import { InvalidArgumentError } from '../errors.js';

/** The machines a timeline follows, by machine id. */
export type TimelineActorKind = 'run' | 'session' | 'turn-loop';

/** The actor kinds a trace line may name. */
export const timelineActorKinds: readonly TimelineActorKind[] = ['run', 'session', 'turn-loop'];

/** One lifecycle transition of one actor: a line of a timeline trace. */
export interface TimelineTransition {
  /** Clock time of the transition, in ms. */
  readonly t: number;
  /** Which machine the actor runs. */
  readonly actor: TimelineActorKind;
  /** Run id, session key (`ownerId/sessionId`) or turn loop id. */
  readonly id: string;
  /** Session key of a top-level run, parent run id of a nested run, `null` for a root. */
  readonly parentId: string | null;
  /** Dotted state path before the transition; `null` on the actor's first line. */
  readonly from: string | null;
  /** Dotted state path after the transition. */
  readonly to: string;
  /** Type of the XState event that caused the transition. */
  readonly event: string;
  /** Why, beyond the event type (`preempt`, `escalation`, `interrupt`, …), or `null`. */
  readonly cause: string | null;
}

/**
 * Encodes a transition as one trace line (no newline): `null` fields left out, `parentId` only on
 * the actor's first line (`from: null`).
 *
 * @param transition - the transition to encode
 * @returns a JSON object text, about 100 bytes
 * @throws never
 */
export function encodeTimelineTransition(transition: TimelineTransition): string {
  const { t, actor, id, parentId, from, to, event, cause } = transition;
  return JSON.stringify({
    t,
    actor,
    id,
    parentId: from === null ? (parentId ?? undefined) : undefined,
    from: from ?? undefined,
    to,
    event,
    cause: cause ?? undefined,
  });
}

const isKind = (value: unknown): value is TimelineActorKind =>
  (timelineActorKinds as readonly unknown[]).includes(value);

const optionalString = (value: unknown): value is string | null | undefined =>
  value === undefined || value === null || typeof value === 'string';

/**
 * Parses a JSONL timeline trace (as written by `createTimelineRecorder`).
 *
 * @remarks Blank lines are skipped; omitted fields come back as `null`, except `parentId`, which
 * is carried from the actor's earlier line when a line leaves it out.
 * @param text - the whole trace, one JSON object per line
 * @returns the transitions, in file order
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`, field `trace`) naming the first bad
 *   line number and what is wrong with it
 */
export function parseTimelineTrace(text: string): TimelineTransition[] {
  const transitions: TimelineTransition[] = [];
  const parents = new Map<string, string>();
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!.trim();
    if (line === '') continue;
    const fail = (what: string): never => {
      throw new InvalidArgumentError(
        'trace',
        `expected \`trace\` line ${index + 1} to be a timeline transition, got ${what}`,
      );
    };
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      fail(`invalid JSON: ${line.slice(0, 60)}`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) fail('a non-object');
    const raw = value as Record<string, unknown>;
    if (typeof raw.t !== 'number' || !Number.isFinite(raw.t)) fail('no numeric `t`');
    if (!isKind(raw.actor)) fail(`actor ${JSON.stringify(raw.actor)}`);
    if (typeof raw.id !== 'string' || raw.id === '') fail('no `id`');
    if (typeof raw.to !== 'string' || raw.to === '') fail('no `to`');
    if (typeof raw.event !== 'string') fail('no `event`');
    if (!optionalString(raw.parentId) || !optionalString(raw.from) || !optionalString(raw.cause))
      fail('a non-string `parentId`, `from` or `cause`');
    const key = `${raw.actor as string}\u0000${raw.id as string}`;
    if (typeof raw.parentId === 'string') parents.set(key, raw.parentId);
    transitions.push({
      t: raw.t as number,
      actor: raw.actor as TimelineActorKind,
      id: raw.id as string,
      parentId: parents.get(key) ?? null,
      from: (raw.from as string | undefined) ?? null,
      to: raw.to as string,
      event: raw.event as string,
      cause: (raw.cause as string | undefined) ?? null,
    });
  }
  return transitions;
}
