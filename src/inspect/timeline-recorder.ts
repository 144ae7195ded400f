/**
 * createTimelineRecorder: writes run, session and turn-loop lifecycles as a compact JSONL trace,
 * the input of `runplane timeline` (docs/architecture.md, "Inspection").
 *
 * @module
 */
import type { InspectionEvent } from 'xstate';
import { systemClock, type Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import { createTimelineTracker } from './timeline-tracker.js';
import { encodeTimelineTransition, type TimelineTransition } from './timeline-transition.js';

/**
 * Where trace lines go: a function, or anything with `write(chunk)` (a Node `fs.WriteStream`, a
 * `process.stdout`). Each call gets one complete line ending in `\n`.
 */
export type TimelineSink = ((chunk: string) => void) | { write(chunk: string): unknown };

/** Options of {@link createTimelineRecorder}. */
export interface TimelineRecorderOptions {
  /** Receives one JSONL line per transition. */
  readonly sink: TimelineSink;
  /** Stamps each line's `t` (ms); pass the runtime's clock. @default the system clock */
  readonly clock?: Pick<Clock, 'now'>;
  /** Keeps only the transitions it returns true for. @default every transition */
  readonly filter?: (transition: TimelineTransition) => boolean;
  /** Receives a throwing sink's error; the runtime goes on. @default console.error */
  readonly onError?: (error: unknown) => void;
}

/** A running timeline recorder. */
export interface TimelineRecorder {
  /** The inspection observer: `createRuntime({ inspect: recorder.inspect })`. */
  readonly inspect: (event: InspectionEvent) => void;
  /** Number of lines written so far. */
  readonly count: number;
}

/**
 * Creates a recorder that turns XState inspection events into a timeline trace, one line per
 * lifecycle transition of a run, session or turn loop.
 *
 * @remarks
 * Line format: {@link TimelineTransition} (`{ t, actor, id, parentId, from, to, event, cause }`,
 * `null` fields left out). Only `@xstate.snapshot` and `@xstate.microstep` are read, so the cost
 * per inspection event is small and the trace stays compact: about 110 bytes per line, four or
 * five lines per run, a few per session (a 10,000-run trace with epoch timestamps: 4.8 MB). Writes are
 * synchronous with the transition; a slow file sink buffers in its stream. A sink that throws is
 * reported to `onError` and never reaches the runtime. To feed several observers (this recorder,
 * a live hub, `@statelyai/inspect`), combine them with {@link combineInspectors}.
 *
 * @param options - {@link TimelineRecorderOptions}
 * @returns `{ inspect, count }`
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when `sink` is neither a function nor
 *   has a `write` method
 * @example
 * ```ts
 * import { createWriteStream } from 'node:fs';
 * const file = createWriteStream('trace.jsonl');
 * const recorder = createTimelineRecorder({ sink: file });
 * const runtime = createRuntime({ inspect: recorder.inspect });
 * // … runs …
 * await runtime.shutdown();
 * file.end(); // then: npx runplane timeline trace.jsonl -o timeline.html
 * ```
 */
export function createTimelineRecorder(options: TimelineRecorderOptions): TimelineRecorder {
  const { sink } = options;
  let write: (chunk: string) => void;
  if (typeof sink === 'function') write = sink;
  else if (typeof sink === 'object' && sink !== null && typeof sink.write === 'function')
    write = (chunk) => void sink.write(chunk);
  else
    throw new InvalidArgumentError(
      'sink',
      `expected \`sink\` to be a function or an object with a write method, got ${typeof sink}`,
    );
  const onError = options.onError ?? ((error: unknown) => console.error('[runplane]', error));
  const filter = options.filter;
  let count = 0;
  const inspect = createTimelineTracker({
    clock: options.clock ?? systemClock,
    onError,
    listener: (transition) => {
      if (filter !== undefined && !filter(transition)) return;
      write(`${encodeTimelineTransition(transition)}\n`);
      count++;
    },
  });
  return {
    inspect,
    get count() {
      return count;
    },
  };
}

/**
 * Combines inspection observers into one, for `createRuntime({ inspect })`.
 *
 * @remarks Each observer gets every event in argument order; one that throws is reported with
 * `console.error` and the others still run, so a broken inspector cannot break an actor.
 * @param observers - functions or `{ next }` observers (e.g. `@statelyai/inspect`'s `inspect`)
 * @returns a single inspection function
 * @throws never
 * @example
 * ```ts
 * createRuntime({ inspect: combineInspectors(recorder.inspect, hub.inspect) });
 * ```
 */
export function combineInspectors(
  ...observers: ReadonlyArray<
    ((event: InspectionEvent) => void) | { next?: (event: InspectionEvent) => void }
  >
): (event: InspectionEvent) => void {
  const onError = (error: unknown) => console.error('[runplane]', error);
  const calls = observers.map((observer) =>
    typeof observer === 'function' ? observer : (event: InspectionEvent) => observer.next?.(event),
  );
  return (event) => {
    for (const call of calls) {
      try {
        call(event);
      } catch (error) {
        onError(error);
      }
    }
  };
}
