/**
 * Parent links that inspection cannot see: runs are root actors (not XState children, see
 * README "Design notes"), so a nested run's parent is told to the timeline here.
 *
 * @module
 */

const parents = new WeakMap<object, string>();

/**
 * Records the parent id the timeline should show for `actorRef`.
 *
 * @remarks Kept in a `WeakMap`: the entry goes away with the actor. Call it before the actor
 * starts, so its first inspected snapshot already knows its parent.
 * @param actorRef - the actor (an XState `Actor`)
 * @param parentId - the parent's timeline id (for a nested run: the parent run id)
 * @returns nothing
 * @throws never
 */
export function setInspectedParent(actorRef: object, parentId: string): void {
  parents.set(actorRef, parentId);
}

/**
 * The parent id recorded with {@link setInspectedParent}, if any.
 *
 * @param actorRef - the actor
 * @returns the parent's timeline id, or `undefined`
 * @throws never
 */
export function getInspectedParent(actorRef: object): string | undefined {
  return parents.get(actorRef);
}
