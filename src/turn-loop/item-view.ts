/**
 * Item views: a TurnLoop's items in hand as the arrays that hold them, each with the length it
 * had when the view was taken, so that a save reads what changed since the last one without
 * copying what did not (docs/architecture.md, "Checkpoints and stores").
 *
 * @remarks The loop's item arrays are append-only: its buffer grows in place at every push and
 * is otherwise replaced by a new array, never shifted or spliced, and every other item array
 * is replaced, never written. The first `length` items of a part therefore stay what they were
 * when the view was taken, and a later view whose parts are the same arrays, no shorter, holds
 * the earlier view's items followed by the new ones: a save after pushes finds them in
 * O(pushes), without comparing the items held.
 *
 * @module
 */

/** One array of a view and its length when the view was taken. @internal */
export interface ItemPart {
  readonly items: readonly unknown[];
  readonly length: number;
}

/** A list of items as the parts that hold it, in order; empty arrays are left out. @internal */
export type ItemView = readonly ItemPart[];

/**
 * A view of these arrays, in order, as they are now.
 *
 * @internal
 */
export function viewOf(arrays: ReadonlyArray<readonly unknown[] | undefined>): ItemView {
  const parts: ItemPart[] = [];
  for (const items of arrays) {
    if (items !== undefined && items.length > 0) parts.push({ items, length: items.length });
  }
  return parts;
}

/** The items of a view, in order (a new array). @internal */
export function flattenView(view: ItemView): unknown[] {
  if (view.length === 1) return view[0]!.items.slice(0, view[0]!.length);
  const items: unknown[] = [];
  for (const { items: part, length } of view) {
    for (let i = 0; i < length; i++) items.push(part[i]);
  }
  return items;
}

/**
 * The items `after` holds beyond `before`, when `after` is `before` with items appended (its
 * parts the same arrays, the last of `before` grown, and maybe new parts after it); else
 * `undefined`. O(parts + appended items).
 *
 * @internal
 */
export function appendedSince(before: ItemView, after: ItemView): unknown[] | undefined {
  if (after.length < before.length) return undefined;
  const last = before.length - 1;
  for (let i = 0; i < before.length; i++) {
    const was = before[i]!;
    const now = after[i]!;
    if (now.items !== was.items) return undefined;
    if (i < last ? now.length !== was.length : now.length < was.length) return undefined;
  }
  const appended: unknown[] = [];
  for (let i = Math.max(0, last); i < after.length; i++) {
    const { items, length } = after[i]!;
    const from = i === last ? before[last]!.length : 0;
    for (let j = from; j < length; j++) appended.push(items[j]);
  }
  return appended;
}
