/**
 * The checkpoint image: a saved checkpoint as immutable data with structural sharing (immer),
 * its buffered items laid out in chunks, so that the next save is the immer patches from the
 * stored image to the new one (docs/architecture.md, "Checkpoints and stores").
 *
 * @remarks immer copies a container shallowly on every change, and an array change gives a
 * patch per shifted index. A flat 100,000-item list would be copied whole by one push and
 * dropping its first item would give 100,000 patches. Here the unhandled items are chunks of
 * at most {@link chunkSize} items in a record keyed by chunk number (`first … next - 1`):
 * a push changes one chunk (one `add` patch), items taken from the front delete whole chunks
 * (one `remove` patch each) and rewrite at most one, items put back in front get new chunks.
 * The layout is a pure function of the item list ({@link toImage}), so a load rebuilds the
 * image a chain of patches was written against from the base checkpoint alone.
 *
 * @module
 */
import { enablePatches, Immer, type Patch } from 'immer';
import type { Checkpoint } from './checkpoint.js';

enablePatches();
/**
 * Patches on; no auto-freeze: the image never leaves the keeper and `produce` never changes its
 * base, and freezing walks what it freezes (measured: it made a save after one push into
 * 100,000 items cost tens of ms).
 */
const immer = new Immer({ autoFreeze: false });

/** Items per chunk of the image's unhandled list. @internal */
export const chunkSize = 512;

/** A list of items in chunks `first … next - 1`, each of at most {@link chunkSize} items. @internal */
export interface ItemChunks {
  readonly first: number;
  readonly next: number;
  readonly chunks: Readonly<Record<string, readonly unknown[]>>;
}

/** A checkpoint with its unhandled items in chunks. @internal */
export type CheckpointImage = Omit<Checkpoint, 'unhandled'> & { readonly unhandled: ItemChunks };

/**
 * The image of a checkpoint: deterministic chunking from chunk 0 (items are frozen at push).
 *
 * @internal
 */
export function toImage(checkpoint: Checkpoint): CheckpointImage {
  const items = checkpoint.unhandled;
  const chunks: Record<string, readonly unknown[]> = {};
  let next = 0;
  for (let at = 0; at < items.length; at += chunkSize) {
    chunks[next++] = items.slice(at, at + chunkSize);
  }
  return { ...checkpoint, unhandled: { first: 0, next, chunks } };
}

/** The items of a chunked list, in order. */
function flattenItems(list: ItemChunks): unknown[] {
  const chunks: Array<readonly unknown[]> = [];
  for (let id = list.first; id < list.next; id++) chunks.push(list.chunks[id] ?? []);
  return ([] as unknown[]).concat(...chunks);
}

/** The checkpoint an image stands for. @internal */
export function fromImage(image: CheckpointImage): Checkpoint {
  return { ...image, unhandled: flattenItems(image.unhandled) };
}

/**
 * How a new item list is the old one edited at its ends: `drop` items left the front, `front`
 * went in before the kept middle and `appended` after it. @internal
 */
export interface ItemEdit {
  readonly drop: number;
  readonly front: readonly unknown[];
  readonly appended: readonly unknown[];
}

/** An alignment of `after` on `before`: `drop` items left the front, `prepend` came in front. */
interface Alignment {
  readonly drop: number;
  readonly prepend: number;
}

const keeps = (before: readonly unknown[], after: readonly unknown[], a: Alignment): boolean => {
  const kept = before.length - a.drop;
  if (a.drop < 0 || a.prepend < 0 || a.prepend + kept > after.length) return false;
  for (let j = 0; j < kept; j++) if (after[a.prepend + j] !== before[a.drop + j]) return false;
  return true;
};

/**
 * Finds how `after` keeps a contiguous tail of `before` (items compared by identity, O(items)):
 * the front taken by a turn (`drop`), or items put back in front (`front`). `undefined` when
 * the two share no such middle, or when nothing of a non-empty `before` is kept and more than a
 * chunk is new (a whole save is then as small).
 *
 * @internal
 */
export function alignItems(
  before: readonly unknown[],
  after: readonly unknown[],
): ItemEdit | undefined {
  const candidates: Alignment[] = [
    { drop: 0, prepend: 0 },
    { drop: after.length === 0 ? before.length : before.indexOf(after[0]), prepend: 0 },
    { drop: 0, prepend: after.indexOf(before[0]) },
  ];
  const found =
    before.length === 0 ? candidates[0] : candidates.find((c) => keeps(before, after, c));
  if (found === undefined) return undefined;
  const keepsNothing = before.length > 0 && found.drop === before.length;
  if (keepsNothing && after.length > chunkSize) return undefined;
  return {
    drop: found.drop,
    front: after.slice(0, found.prepend),
    appended: after.slice(found.prepend + before.length - found.drop),
  };
}

/** Whether two item lists hold the same items (by identity), in order. */
const sameItems = (a: readonly unknown[], b: readonly unknown[]): boolean =>
  a.length === b.length && a.every((item, i) => item === b[i]);

const envelopeKeys = ['format', 'version', 'kind', 'agentState', 'suspension', 'savedAt'] as const;

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Writes into `draft` only the leaves of `after` that differ from `before` (compared as JSON,
 * which is what is stored): the loop snapshot changes a few fields between two saves, so its
 * patch names those fields instead of carrying the whole snapshot.
 */
function assignChanged(
  draft: Record<string, unknown>,
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): void {
  for (const key of Object.keys(before)) {
    if (before[key] !== undefined && after[key] === undefined) delete draft[key];
  }
  for (const [key, value] of Object.entries(after)) {
    const old = before[key];
    if (value === undefined || value === old) continue;
    if (isPlainObject(value) && isPlainObject(old)) {
      assignChanged(draft[key] as Record<string, unknown>, old, value);
    } else if (JSON.stringify(value) !== JSON.stringify(old)) {
      draft[key] = value;
    }
  }
}

/** A checkpoint without its unhandled items: what {@link editImage} writes besides them. @internal */
export type CheckpointEnvelope = Omit<Checkpoint, 'unhandled'>;

/**
 * The next image and the immer patches from `image` to it: the envelope's changed fields, and
 * the unhandled items edited as `edit` says. O(changed fields + edited items + chunks).
 *
 * @internal
 */
export function editImage(
  image: CheckpointImage,
  envelope: CheckpointEnvelope,
  edit: ItemEdit,
): { image: CheckpointImage; patches: Patch[] } {
  const [next, patches] = immer.produceWithPatches(image, (draft) => {
    const target = draft as unknown as Record<string, unknown>;
    for (const key of envelopeKeys) {
      const value = envelope[key];
      if (value === image[key]) continue;
      if (value === undefined) delete target[key];
      else target[key] = value;
    }
    assignChanged(target.loop as Record<string, unknown>, image.loop, envelope.loop);
    if (!sameItems(image.interrupted, envelope.interrupted)) {
      target.interrupted = envelope.interrupted;
    }
    editChunks(image.unhandled, draft.unhandled, edit);
  });
  return { image: next, patches };
}

/**
 * The next image and the immer patches from `image` to it, or `undefined` when the unhandled
 * items changed too much to be worth a patch (see {@link alignItems}).
 *
 * @internal
 */
export function nextImage(
  image: CheckpointImage,
  checkpoint: Checkpoint,
  before: readonly unknown[] = flattenItems(image.unhandled),
): { image: CheckpointImage; patches: Patch[] } | undefined {
  const edit = alignItems(before, checkpoint.unhandled);
  return edit === undefined ? undefined : editImage(image, checkpoint, edit);
}

/** The draft of an {@link ItemChunks}, writable. */
interface DraftChunks {
  first: number;
  next: number;
  chunks: Record<string, unknown[]>;
}

/** Applies an edit to the draft of a chunked list, reading the old chunks from `base`. */
function editChunks(
  base: ItemChunks,
  draft: DraftChunks,
  { drop, front, appended }: ItemEdit,
): void {
  let { first, next } = base;
  // The front taken: whole chunks are deleted, at most one is rewritten.
  for (let left = drop; left > 0 && first < next;) {
    const chunk = base.chunks[first] ?? [];
    if (chunk.length <= left) {
      delete draft.chunks[first];
      first++;
      left -= chunk.length;
    } else {
      draft.chunks[first] = chunk.slice(left);
      left = 0;
    }
  }
  // Items put back in front: new chunks before the first.
  for (let end = front.length; end > 0; end -= chunkSize) {
    draft.chunks[--first] = front.slice(Math.max(0, end - chunkSize), end);
  }
  // Items appended: the last chunk is filled, then new chunks.
  let at = 0;
  const last = next > first ? draft.chunks[next - 1] : undefined;
  if (at < appended.length && last !== undefined && last.length < chunkSize) {
    const room = chunkSize - last.length;
    for (const item of appended.slice(at, at + room)) last.push(item);
    at += room;
  }
  for (; at < appended.length; at += chunkSize) {
    draft.chunks[next++] = appended.slice(at, at + chunkSize);
  }
  if (first !== base.first) draft.first = first;
  if (next !== base.next) draft.next = next;
}

/**
 * Applies stored patches to an image.
 *
 * @throws whatever immer throws for a patch that does not fit the image
 * @internal
 */
export function applyImagePatches(
  image: CheckpointImage,
  patches: readonly Patch[],
): CheckpointImage {
  return immer.applyPatches(image, patches);
}
