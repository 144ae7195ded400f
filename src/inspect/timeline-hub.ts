/**
 * createTimelineHub: the live side of the timeline. Turns a runtime's inspection stream into
 * owner-scoped transitions that a service streams as Server-Sent Events to the viewer page at
 * `/inspect` (docs/architecture.md, "Event log and HTTP service", §12).
 *
 * @module
 */
import type { InspectionEvent } from 'xstate';
import { systemClock, type Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import { createTimelineTracker } from './timeline-tracker.js';
import type { TimelineTransition } from './timeline-transition.js';

/** A transition as the hub hands it out: numbered for SSE `id:` and resumption. */
export interface TimelineEntry {
  /**
   * 1, 2, 3, … per owner: each owner has a counter of its own, so an id tells nothing of other
   * owners' activity (a gap would count their transitions).
   */
  readonly seq: number;
  readonly transition: TimelineTransition;
}

/** Options of {@link createTimelineHub}. */
export interface TimelineHubOptions {
  /** Stamps `t` (ms) and drives heartbeats; pass the runtime's clock. @default the system clock */
  readonly clock?: Clock;
  /**
   * How many recent transitions (all owners together) are kept for replay to a subscriber that
   * connects late or resumes; a non-negative integer. @default 5000
   */
  readonly historyLimit?: number;
  /** Receives a throwing listener's error; other listeners still run. @default console.error */
  readonly onError?: (error: unknown) => void;
}

/** Options of {@link TimelineHub.stream}. */
export interface TimelineStreamOptions {
  /** Replay kept transitions with `seq > after` first (e.g. from `Last-Event-ID`). @default 0 (all kept) */
  readonly after?: number;
  /** Aborting it ends the stream (e.g. the request's signal). */
  readonly signal?: AbortSignal;
  /** A `: ping` comment this often, in ms, keeps proxies from closing the stream; 0 = none. @default 15000 */
  readonly heartbeatMs?: number;
}

/** The live timeline of a runtime, scoped by owner. */
export interface TimelineHub {
  /** The inspection observer: `createRuntime({ inspect: hub.inspect })`. */
  readonly inspect: (event: InspectionEvent) => void;
  /**
   * Calls `listener` with every transition of `ownerId`'s runs, sessions and turn loops: first
   * the kept ones with `seq > after`, then each new one as it happens.
   *
   * @param ownerId - the authenticated owner; nobody else's transitions are ever delivered
   * @param listener - receives entries in `seq` order; a throw is reported, not propagated
   * @param options - `after`: resume point (default 0, i.e. all kept history)
   * @returns an unsubscribe function
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty `ownerId`
   */
  subscribe(
    ownerId: string,
    listener: (entry: TimelineEntry) => void,
    options?: { after?: number },
  ): () => void;
  /**
   * The kept transitions of `ownerId` with `seq > after`, oldest first.
   *
   * @param ownerId - the owner
   * @param options - `after` (default 0)
   * @returns a fresh array
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty `ownerId`
   */
  history(ownerId: string, options?: { after?: number }): TimelineEntry[];
  /**
   * How many listeners (streams included) follow `ownerId` now.
   *
   * @param ownerId - the owner
   * @returns the count; 0 once every stream of that owner ended
   * @throws never
   */
  subscriberCount(ownerId: string): number;
  /**
   * `ownerId`'s transitions as a `text/event-stream` body, ready for `new Response(body)`.
   *
   * @remarks Opens with the comment `: runplane timeline`. Each frame is then `id: <seq>`,
   * `event: transition`, `data: <TimelineTransition JSON>` (every field present, `null`
   * included), then a blank line. Replays kept history after `after`, then follows live. Ends
   * when `signal` aborts or the reader cancels (a client disconnect); both unsubscribe and stop
   * the heartbeat. A reader more than 10,000 frames behind is cut off; it resumes by id.
   * @param ownerId - the authenticated owner
   * @param options - {@link TimelineStreamOptions}
   * @returns a stream of UTF-8 SSE frames
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty `ownerId` or a bad
   *   `after` / `heartbeatMs`
   */
  stream(ownerId: string, options?: TimelineStreamOptions): ReadableStream<Uint8Array>;
}

interface HubRecord {
  readonly ownerId: string;
  readonly entry: TimelineEntry;
}

const checkOwner = (ownerId: unknown): void => {
  if (typeof ownerId !== 'string' || ownerId === '') {
    throw new InvalidArgumentError(
      'ownerId',
      `expected \`ownerId\` to be a non-empty string, got ${JSON.stringify(ownerId)}`,
    );
  }
};

const checkCount = (name: string, value: unknown, fallback: number): number => {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be a non-negative integer, got ${JSON.stringify(value) ?? typeof value}`,
    );
  }
  return value;
};

/** Frames a stream may fall behind by before it is ended (the client resumes from its last id). */
const maxBacklog = 10_000;

/** The first bytes of every stream: an SSE comment, so servers flush the response at once. */
const openingComment = ': runplane timeline\n\n';

/** One SSE frame; JSON text never holds a raw newline, and `id` is a number. */
const toFrame = (entry: TimelineEntry): string =>
  `id: ${entry.seq}\nevent: transition\ndata: ${JSON.stringify(entry.transition)}\n\n`;

/**
 * Creates a hub that follows a runtime's actors and serves their transitions, per owner, to live
 * viewers.
 *
 * @remarks
 * The hub keeps the last `historyLimit` transitions in a ring buffer so a viewer opened mid-run
 * still sees the lanes of live runs, and a reconnecting `EventSource` resumes with
 * `Last-Event-ID`. A transition belongs to the owner in its actor's context (`ownerId`); actors
 * without one (none today) are never delivered. The service mounts {@link TimelineHub.stream}
 * behind its bearer-token auth, and serves the page from `renderTimelinePage`.
 * @param options - {@link TimelineHubOptions}
 * @returns the hub
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad `historyLimit`
 * @example
 * ```ts
 * const hub = createTimelineHub();
 * const runtime = createRuntime({ inspect: hub.inspect });
 * // in a route, after authentication:
 * return new Response(hub.stream(ownerId, { signal: request.signal }), {
 *   headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
 * });
 * ```
 */
export function createTimelineHub(options: TimelineHubOptions = {}): TimelineHub {
  const clock = options.clock ?? systemClock;
  const historyLimit = checkCount('historyLimit', options.historyLimit, 5_000);
  const onError = options.onError ?? ((error: unknown) => console.error('[runplane]', error));
  const ring: Array<HubRecord | undefined> = new Array<HubRecord | undefined>(historyLimit);
  let ringStart = 0;
  let ringSize = 0;
  /** The last `seq` handed out, per owner (one number per owner ever seen). */
  const seqs = new Map<string, number>();
  const listeners = new Map<string, Set<(entry: TimelineEntry) => void>>();

  const keep = (record: HubRecord) => {
    if (historyLimit === 0) return;
    if (ringSize < historyLimit) {
      ring[(ringStart + ringSize) % historyLimit] = record;
      ringSize++;
    } else {
      ring[ringStart] = record;
      ringStart = (ringStart + 1) % historyLimit;
    }
  };

  const history = (ownerId: string, after: number): TimelineEntry[] => {
    const entries: TimelineEntry[] = [];
    for (let i = 0; i < ringSize; i++) {
      const record = ring[(ringStart + i) % historyLimit]!;
      if (record.ownerId === ownerId && record.entry.seq > after) entries.push(record.entry);
    }
    return entries;
  };

  const deliver = (listener: (entry: TimelineEntry) => void, entry: TimelineEntry) => {
    try {
      listener(entry);
    } catch (error) {
      onError(error);
    }
  };

  const inspect = createTimelineTracker({
    clock,
    onError,
    listener: (transition, ownerId) => {
      // A transition of no owner is never delivered: neither numbered nor kept.
      if (ownerId === undefined) return;
      const seq = (seqs.get(ownerId) ?? 0) + 1;
      seqs.set(ownerId, seq);
      const entry: TimelineEntry = { seq, transition };
      keep({ ownerId, entry });
      const set = listeners.get(ownerId);
      if (set === undefined) return;
      for (const listener of [...set]) deliver(listener, entry);
    },
  });

  const subscribe: TimelineHub['subscribe'] = (ownerId, listener, subscribeOptions = {}) => {
    checkOwner(ownerId);
    const after = checkCount('after', subscribeOptions.after, 0);
    for (const entry of history(ownerId, after)) deliver(listener, entry);
    let set = listeners.get(ownerId);
    if (set === undefined) listeners.set(ownerId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && listeners.get(ownerId) === set) listeners.delete(ownerId);
    };
  };

  const stream: TimelineHub['stream'] = (ownerId, streamOptions = {}) => {
    checkOwner(ownerId);
    const after = checkCount('after', streamOptions.after, 0);
    const heartbeatMs = checkCount('heartbeatMs', streamOptions.heartbeatMs, 15_000);
    const encoder = new TextEncoder();
    const { signal } = streamOptions;
    let close = () => {};
    return new ReadableStream<Uint8Array>({
      start(controller) {
        let closed = false;
        let heartbeat: unknown;
        const send = (text: string) => {
          if (closed) return;
          // A reader this far behind is gone or stuck: end the stream; it can resume by id.
          if ((controller.desiredSize ?? 0) < -maxBacklog) {
            close();
            controller.close();
            return;
          }
          controller.enqueue(encoder.encode(text));
        };
        const armHeartbeat = () => {
          if (heartbeatMs === 0 || closed) return;
          heartbeat = clock.setTimeout(() => {
            send(': ping\n\n');
            armHeartbeat();
          }, heartbeatMs);
        };
        let unsubscribe = () => {};
        close = () => {
          if (closed) return;
          closed = true;
          unsubscribe();
          if (heartbeat !== undefined) clock.clearTimeout(heartbeat);
          signal?.removeEventListener('abort', onAbort);
        };
        const onAbort = () => {
          close();
          controller.close();
        };
        if (signal?.aborted === true) {
          onAbort();
          return;
        }
        signal?.addEventListener('abort', onAbort, { once: true });
        send(openingComment); // gets the response headers out before the first transition
        unsubscribe = subscribe(ownerId, (entry) => send(toFrame(entry)), { after });
        armHeartbeat();
      },
      cancel() {
        close();
      },
    });
  };

  return {
    inspect,
    subscribe,
    history(ownerId, historyOptions = {}) {
      checkOwner(ownerId);
      return history(ownerId, checkCount('after', historyOptions.after, 0));
    },
    stream,
    subscriberCount: (ownerId) => listeners.get(ownerId)?.size ?? 0,
  };
}
