/**
 * Server-sent events for a session's event log: frames with `id: <seq>`, heartbeat comments,
 * an error frame on failure, and a clean close when the client goes (docs/architecture.md, "Event log and HTTP service").
 *
 * @module
 */
import type { Clock } from '../clock.js';
import type { RunplaneEvent, SessionKey } from '../events/event-log.js';
import type { SessionEventReads } from './session-access.js';

/** An event as the HTTP API shows it (snake_case, `run_id` null when none). */
export interface EventJson {
  readonly seq: number;
  readonly id: string;
  readonly session_id: string;
  readonly run_id: string | null;
  readonly type: string;
  readonly payload: Readonly<Record<string, unknown>>;
  readonly at: number;
}

/** Converts a logged event to its JSON form. */
export function toEventJson(event: RunplaneEvent): EventJson {
  return {
    seq: event.seq,
    id: event.id,
    session_id: event.sessionId,
    run_id: event.runId ?? null,
    type: event.type,
    payload: event.payload,
    at: event.at,
  };
}

const lineBreak = /[\r\n]/;

/**
 * Formats one SSE frame: `id: <seq>`, `event: <type>`, `data: <json>`, blank line.
 *
 * @remarks The data is one line of JSON. A type holding CR or LF could forge fields, so its
 * `event:` line is left out (the type is still in the data); `id` is a number.
 *
 * @param event - the logged event
 * @returns the frame text
 */
export function formatEventFrame(event: RunplaneEvent): string {
  const eventLine = lineBreak.test(event.type) ? '' : `event: ${event.type}\n`;
  return `id: ${event.seq}\n${eventLine}data: ${JSON.stringify(toEventJson(event))}\n\n`;
}

/** The heartbeat comment frame. */
export const heartbeatFrame = ': heartbeat\n\n';

/**
 * Formats the error frame sent before a stream closes on a failure.
 *
 * @param code - the error code, e.g. `store_failed`
 * @param message - a human sentence
 * @returns `event: error` with `data: {"error":{"code","message"}}`
 */
export function formatErrorFrame(code: string, message: string): string {
  return `event: error\ndata: ${JSON.stringify({ error: { code, message } })}\n\n`;
}

/** The default byte budget of one SSE stream's unread frames: 256 KiB. */
const defaultStreamBufferBytes = 256 * 1024;

/**
 * The comment that ends a stream whose reader fell behind its byte budget; the reader resumes
 * with `Last-Event-ID` (an `EventSource` does so by itself).
 */
const behindFrame = ': behind; reconnect with Last-Event-ID\n\n';

/** Options of {@link createEventStream}. */
export interface EventStreamOptions {
  /** The session's log, read (an `EventLog` will do). */
  readonly eventLog: Pick<SessionEventReads, 'read' | 'follow'>;
  readonly key: SessionKey;
  /** Exclusive `seq` cursor to resume after. */
  readonly after: number;
  /** Only these event types; `undefined` for all. */
  readonly types: readonly string[] | undefined;
  /** The clock the heartbeat runs on. */
  readonly clock: Clock;
  /** Interval of heartbeat comments, in ms (a positive number). */
  readonly heartbeatMs: number;
  /**
   * The byte budget of frames written but not yet taken by the reader; the stream stops
   * reading the log while it is full, and a reader that takes nothing for a whole heartbeat
   * interval while it is full is ended (see {@link createEventStream}). A positive integer.
   * @default 262144 (256 KiB, {@link defaultStreamBufferBytes})
   */
  readonly maxBufferedBytes?: number;
  /** Aborted when the client disconnects (the request's signal) or the service closes streams. */
  readonly signal: AbortSignal;
  /** Called once when the stream has closed, whatever the reason. */
  readonly onClose?: () => void;
  /** Receives a failure of the log (it is also sent as an error frame). */
  readonly reportError?: (error: unknown) => void;
}

/**
 * Creates the body of an SSE response that replays a session's log after `after` and follows
 * it live.
 *
 * @remarks Only reads the log: closing it, for any reason, never touches a run. It closes when
 * `signal` aborts, when the reader cancels (the client went away), or after an error frame
 * when the log fails. Unread frames are counted in bytes: while they fill `maxBufferedBytes`
 * the stream reads no further (backpressure). A reader that takes nothing from a full buffer
 * for a whole heartbeat interval has fallen behind: the stream stops following the log, ends
 * with the comment {@link behindFrame} once the reader has taken what was buffered, and the
 * reader resumes from its last `id` with `Last-Event-ID`, losing nothing. So a paused reader
 * holds at most the budget plus one frame, whatever the size of the events.
 *
 * @param options - {@link EventStreamOptions}
 * @returns a byte stream of SSE frames
 */
export function createEventStream(options: EventStreamOptions): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const budget = options.maxBufferedBytes ?? defaultStreamBufferBytes;
  const stop = new AbortController();
  /** Whether the reader took a frame since the last heartbeat. */
  let progressed = false;
  /** Set once the reader fell behind: the stream ends after what is buffered. */
  let behind = false;
  let wakeDrained: (() => void) | undefined;
  let heartbeat: unknown;
  let closed = false;
  let wakeWriter: (() => void) | undefined;
  let controller!: ReadableStreamDefaultController<Uint8Array>;

  const finish = (closeController: boolean) => {
    if (closed) return;
    closed = true;
    stop.abort();
    options.signal.removeEventListener('abort', onAbort);
    if (heartbeat !== undefined) options.clock.clearTimeout(heartbeat);
    wakeWriter?.();
    wakeDrained?.();
    if (closeController) {
      try {
        controller.close();
      } catch {
        // Already closed or errored by the reader.
      }
    }
    options.onClose?.();
  };
  // The service is closing the stream (shutdown): end the follow, then write what the log
  // already holds before closing, so a client sees the runs' final events.
  let ending = false;
  const onAbort = () => {
    ending = true;
    stop.abort();
    wakeWriter?.();
  };

  const write = (text: string) => {
    if (!closed) controller.enqueue(encoder.encode(text));
  };
  const full = () => (controller.desiredSize ?? 1) <= 0;
  const armHeartbeat = () => {
    heartbeat = options.clock.setTimeout(() => {
      heartbeat = undefined;
      if (closed) return;
      if (full() && !progressed) {
        // A whole interval without taking a byte of a full buffer: end after what it holds.
        behind = true;
        stop.abort();
        wakeWriter?.();
        return;
      }
      progressed = false;
      write(heartbeatFrame);
      armHeartbeat();
    }, options.heartbeatMs);
  };
  const roomToWrite = (): Promise<void> | undefined => {
    if (!full()) return undefined;
    return new Promise<void>((resolve) => (wakeWriter = resolve));
  };
  /** Resolves once the reader has taken every buffered frame (or went away). */
  const drained = (): Promise<void> | undefined => {
    if (closed || (controller.desiredSize ?? budget) >= budget) return undefined;
    return new Promise<void>((resolve) => (wakeDrained = resolve));
  };

  const pump = async () => {
    let lastSeq = options.after;
    try {
      for await (const event of options.eventLog.follow({ signal: stop.signal }, options.key, {
        after: options.after,
        types: options.types,
      })) {
        if (closed || behind) break;
        write(formatEventFrame(event));
        lastSeq = event.seq;
        if (!ending) await roomToWrite();
      }
      if (ending && !closed) {
        const tail = await options.eventLog.read({}, options.key, {
          after: lastSeq,
          types: options.types,
        });
        for (const event of tail) write(formatEventFrame(event));
      }
      if (behind && !closed) {
        write(behindFrame);
        // The stream keeps its place (and its owner's stream count) until the reader has it all.
        await drained();
      }
    } catch (error) {
      if (!closed) {
        options.reportError?.(error);
        write(
          formatErrorFrame(
            'store_failed',
            `the event stream failed: ${error instanceof Error ? error.message : String(error)}`,
          ),
        );
      }
    } finally {
      finish(true);
    }
  };

  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        if (options.signal.aborted) {
          finish(true);
          return;
        }
        options.signal.addEventListener('abort', onAbort, { once: true });
        armHeartbeat();
        void pump();
      },
      pull() {
        progressed = true;
        const wake = wakeWriter;
        wakeWriter = undefined;
        wake?.();
        if ((controller.desiredSize ?? 0) >= budget) {
          const wakeEmpty = wakeDrained;
          wakeDrained = undefined;
          wakeEmpty?.();
        }
      },
      cancel() {
        finish(false);
      },
    },
    { highWaterMark: budget, size: (chunk) => chunk.byteLength },
  );
}
