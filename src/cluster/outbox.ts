/**
 * A session's outbox: the holder's writes, in the order it made them, until Redis has
 * acknowledged them (docs/architecture.md, "Cluster on Redis"). `enqueue` is synchronous, so the
 * runtime's hot path keeps its order and its speed; the shipper takes batches from the front.
 *
 * A write is an event (already numbered by the holder's mirror) or a record op. The op format
 * is a tagged union that the batch script dispatches on, so a later phase adds an op by adding
 * a case here and one in the script.
 *
 * @module
 * @internal
 */
import { InvalidArgumentError, OutboxFullError, type RunplaneError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import type { SessionKeys } from './keys.js';

/**
 * @internal A change to a session's records, applied in the batch that carries it:
 * - `run.put`: replaces the run's record (one hash per run; each field's value stored as JSON);
 * - `run.merge`: sets the given fields of the run's record, keeping the others;
 * - `meta.set` / `meta.del`: session meta fields (strings);
 * - `commands.applied`: the command Stream entry the holder has applied up to (the entries up
 *   to it are trimmed from the Stream);
 * - `command.answer`: a command's answer (`json`), kept `ttlMs` under its request id, and a
 *   nudge (`message`) published on the requester's instance channel;
 * - `history.append`: messages (each its JSON) pushed onto the session's history, and their
 *   `bytes` added to the history's byte count (meta field `history:bytes`);
 * - `history.clear`: deletes the history and its byte count.
 * Fields whose value is `undefined` are left out.
 */
export type RecordOp =
  | {
      readonly op: 'run.put' | 'run.merge';
      readonly runId: string;
      readonly fields: Readonly<Record<string, unknown>>;
    }
  | { readonly op: 'meta.set'; readonly fields: Readonly<Record<string, string>> }
  | { readonly op: 'meta.del'; readonly fields: readonly string[] }
  | { readonly op: 'commands.applied'; readonly id: string }
  | {
      readonly op: 'command.answer';
      readonly requestId: string;
      readonly json: string;
      readonly ttlMs: number;
      readonly channel: string;
      readonly message: string;
    }
  | { readonly op: 'history.append'; readonly messages: readonly string[]; readonly bytes: number }
  | { readonly op: 'history.clear' };

/**
 * One write waiting for Redis. `open`: written inside a group that goes on after it (see
 * {@link Outbox.openGroup}), so no batch ends here.
 */
type OutboxEntry =
  | {
      readonly event: true;
      readonly seq: number;
      readonly json: string;
      readonly runId: string | undefined;
      readonly bytes: number;
      open: boolean;
    }
  | {
      readonly event: false;
      /** The op's script arguments, without the index of its own key. */
      readonly parts: readonly string[];
      /** The key of an op that writes one of its own (a run record, an answer): into KEYS. */
      readonly recordKey: string | undefined;
      readonly bytes: number;
      open: boolean;
    };

/** @internal The writes of one batch: one script call. */
export interface Batch {
  readonly id: string;
  /** The `seq` the batch's first event takes (the stored one + 1, also without events). */
  readonly firstSeq: number;
  /** The `seq` stored once the batch is applied. */
  readonly lastSeq: number;
  readonly entries: readonly OutboxEntry[];
  /** Send attempts so far (the backoff grows with them). */
  attempts: number;
}

/** @internal The ordered writes of one held session. */
export interface Outbox {
  readonly key: SessionKey;
  readonly keys: SessionKeys;
  /** The holder's lease value and fence, which every batch carries. */
  readonly leaseValue: string;
  readonly fence: number;
  /** The last `seq` Redis acknowledged. */
  readonly ackedSeq: number;
  /** Set once the outbox stopped: every later write throws it. */
  readonly stopped: RunplaneError | undefined;
  /** Queues an event (its `seq` is the next after the last queued). @throws the stop error */
  enqueueEvent(seq: number, json: string, runId: string | undefined): void;
  /** Queues a record op. @throws the stop error */
  enqueueOp(op: RecordOp): void;
  /**
   * Opens a group: the writes queued until the returned function is called go to Redis in one
   * batch, all or none (a group longer than a batch's bounds still goes whole). Nothing of an
   * open group ships, so call the function soon (within the step, or a few microtasks).
   */
  openGroup(): () => void;
  /** Resolves once everything queued so far is acknowledged; rejects with the stop error. */
  flushed(): Promise<void>;
}

/** @internal What the shipper sees of an outbox. */
export interface ShippableOutbox extends Outbox {
  /** The batch in flight (kept across retries, so a retry carries the same id), if any. */
  inFlight: Batch | undefined;
  /** Writes waiting, excluding those of the batch in flight. */
  readonly pending: number;
  /**
   * Takes the next batch from the front (call only with nothing in flight); ends only between
   * groups. `undefined` when all that waits is an open group.
   */
  takeBatch(id: string, maxEntries: number, maxBytes: number): Batch | undefined;
  /** The batch in flight was applied. */
  acknowledge(): void;
  /** Stops the outbox: drops its writes, rejects its waiters; later writes throw `error`. */
  stop(error: RunplaneError): void;
}

const byteLength = (text: string) => Buffer.byteLength(text, 'utf8');

const definedFields = <T>(fields: Readonly<Record<string, T | undefined>>): Array<[string, T]> =>
  Object.entries(fields).filter((entry): entry is [string, T] => entry[1] !== undefined);

/**
 * The script arguments of an op (see {@link encodeBatch}), encoded when it is queued so that a
 * value JSON cannot hold fails the caller, not the shipper.
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a run field JSON cannot encode
 */
function encodeOp(op: RecordOp): string[] {
  switch (op.op) {
    case 'run.put':
    case 'run.merge': {
      const fields = definedFields(op.fields);
      const parts = [op.op, op.runId, String(fields.length)];
      for (const [field, value] of fields) {
        let json: string | undefined;
        try {
          json = JSON.stringify(value);
        } catch (error) {
          throw new InvalidArgumentError(
            'fields',
            `expected run field \`${field}\` to be JSON, got a value that fails: ${String(error)}`,
          );
        }
        parts.push(field, json ?? 'null');
      }
      return parts;
    }
    case 'meta.set': {
      const fields = definedFields(op.fields);
      return [op.op, String(fields.length), ...fields.flat()];
    }
    case 'meta.del':
      return [op.op, String(op.fields.length), ...op.fields];
    case 'commands.applied':
      return [op.op, op.id];
    case 'command.answer':
      return [op.op, String(op.ttlMs), op.channel, op.message, op.json];
    case 'history.append':
      return [op.op, String(op.bytes), String(op.messages.length), ...op.messages];
    case 'history.clear':
      return [op.op];
  }
}

/** The key an op writes of its own (it goes into the script's KEYS), if any. */
function recordKeyOf(op: RecordOp, keys: SessionKeys): string | undefined {
  switch (op.op) {
    case 'run.put':
    case 'run.merge':
      return keys.run(op.runId);
    case 'command.answer':
      return keys.answer(op.requestId);
    case 'history.append':
    case 'history.clear':
      return keys.history;
    default:
      return undefined;
  }
}

/**
 * @internal Creates the outbox of a session whose Stream holds `ackedSeq` events.
 *
 * @param onWrite - called after each write (the shipper schedules a batch)
 */
export function createOutbox(
  lease: {
    readonly key: SessionKey;
    readonly keys: SessionKeys;
    readonly value: string;
    readonly fence: number;
  },
  ackedSeq: number,
  limits: { readonly maxEntries: number; readonly maxBytes: number },
  onWrite: (outbox: ShippableOutbox) => void,
  onOverflow: (outbox: ShippableOutbox, error: OutboxFullError) => void,
): ShippableOutbox {
  let entries: OutboxEntry[] = [];
  let bytes = 0;
  let queued = 0;
  let acked = 0;
  let stopped: RunplaneError | undefined;
  let lastAcked = ackedSeq;
  /** Groups open now (see `openGroup`). */
  let openGroups = 0;
  const waiters: Array<{ target: number; resolve: () => void; reject: (error: unknown) => void }> =
    [];

  const push = (entry: OutboxEntry) => {
    if (stopped !== undefined) throw stopped;
    const overflow =
      entries.length + 1 > limits.maxEntries
        ? new OutboxFullError(lease.key.ownerId, lease.key.sessionId, 'entries', limits.maxEntries)
        : bytes + entry.bytes > limits.maxBytes
          ? new OutboxFullError(lease.key.ownerId, lease.key.sessionId, 'bytes', limits.maxBytes)
          : undefined;
    if (overflow !== undefined) {
      onOverflow(outbox, overflow);
      throw overflow;
    }
    entry.open = openGroups > 0;
    entries.push(entry);
    bytes += entry.bytes;
    queued++;
    onWrite(outbox);
  };

  const outbox: ShippableOutbox = {
    key: lease.key,
    keys: lease.keys,
    leaseValue: lease.value,
    fence: lease.fence,
    get ackedSeq() {
      return lastAcked;
    },
    inFlight: undefined,
    get stopped() {
      return stopped;
    },
    get pending() {
      return entries.length - (outbox.inFlight?.entries.length ?? 0);
    },

    enqueueEvent(seq, json, runId) {
      push({ event: true, seq, json, runId, bytes: byteLength(json), open: false });
    },

    enqueueOp(op) {
      const parts = encodeOp(op);
      let size = 0;
      for (const part of parts) size += byteLength(part);
      push({
        event: false,
        parts,
        recordKey: recordKeyOf(op, lease.keys),
        bytes: size,
        open: false,
      });
    },

    openGroup() {
      openGroups++;
      let closed = false;
      return () => {
        if (closed) return;
        closed = true;
        if (--openGroups > 0) return;
        const last = entries.at(-1);
        if (last === undefined || !last.open || stopped !== undefined) return;
        last.open = false; // the group's last write: a batch may end here
        onWrite(outbox);
      };
    },

    flushed() {
      if (stopped !== undefined) return Promise.reject(stopped);
      if (acked >= queued) return Promise.resolve();
      return new Promise((resolve, reject) => waiters.push({ target: queued, resolve, reject }));
    },

    takeBatch(id, maxEntries, maxBytes) {
      let size = 0;
      let count = 0;
      let lastSeq = outbox.ackedSeq;
      // Where the batch may end (after a write outside any open group), and its last seq there.
      let cut = 0;
      let cutSeq = lastSeq;
      for (const entry of entries) {
        const full = count >= maxEntries || (count > 0 && size + entry.bytes > maxBytes);
        if (full && cut > 0) break; // else a group larger than a batch goes whole
        size += entry.bytes;
        count++;
        if (entry.event) lastSeq = entry.seq;
        if (!entry.open) {
          cut = count;
          cutSeq = lastSeq;
        }
      }
      if (cut === 0) return undefined;
      const batch: Batch = {
        id,
        firstSeq: outbox.ackedSeq + 1,
        lastSeq: cutSeq,
        entries: entries.slice(0, cut),
        attempts: 0,
      };
      outbox.inFlight = batch;
      return batch;
    },

    acknowledge() {
      const batch = outbox.inFlight;
      if (batch === undefined) return;
      outbox.inFlight = undefined;
      entries = entries.slice(batch.entries.length);
      for (const entry of batch.entries) bytes -= entry.bytes;
      acked += batch.entries.length;
      lastAcked = batch.lastSeq;
      while (waiters.length > 0 && waiters[0]!.target <= acked) waiters.shift()!.resolve();
    },

    stop(error) {
      if (stopped !== undefined) return;
      stopped = error;
      entries = [];
      bytes = 0;
      outbox.inFlight = undefined;
      for (const waiter of waiters.splice(0)) waiter.reject(error);
    },
  };
  return outbox;
}

/** @internal The KEYS every batch script call starts with (run record keys follow). */
export const toBatchKeys = (keys: SessionKeys): string[] => [
  keys.lease,
  keys.fence,
  keys.seq,
  keys.batch,
  keys.events,
  keys.eventRuns,
  keys.runs,
  keys.meta,
  keys.commandsApplied,
  keys.commands,
];

/**
 * @internal The KEYS and ARGV of the batch script for `batch` (see `shipLua` in scripts.ts):
 * events as their JSON, the run ids that logged, then the ops flattened as
 * `name, …arguments` (`run.put`/`run.merge`: key index, run id, field count, field, JSON, …;
 * `meta.set`: count, field, value, …; `meta.del`: count, field, …; `commands.applied`: id;
 * `command.answer`: key index, ttl ms, channel, message, JSON; `history.append`: key index,
 * bytes, count, JSON, …; `history.clear`: key index).
 */
export function encodeBatch(outbox: Outbox, batch: Batch): { keys: string[]; args: string[] } {
  const { keys } = outbox;
  const scriptKeys = toBatchKeys(keys);
  const events: string[] = [];
  const runIds = new Set<string>();
  const ops: string[] = [];
  for (const entry of batch.entries) {
    if (entry.event) {
      events.push(entry.json);
      if (entry.runId !== undefined) runIds.add(entry.runId);
      continue;
    }
    if (entry.recordKey === undefined) ops.push(...entry.parts);
    else {
      // An op with a key of its own: its name, then the index (1-based) of that key in KEYS.
      scriptKeys.push(entry.recordKey);
      ops.push(entry.parts[0]!, String(scriptKeys.length), ...entry.parts.slice(1));
    }
  }
  return {
    keys: scriptKeys,
    args: [
      outbox.leaseValue,
      String(outbox.fence),
      batch.id,
      keys.tailChannel,
      String(batch.firstSeq),
      String(events.length),
      ...events,
      String(runIds.size),
      ...runIds,
      ...ops,
    ],
  };
}
