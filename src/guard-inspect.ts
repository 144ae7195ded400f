/**
 * A user's XState inspection observer, made unable to break the actors it watches.
 *
 * @module
 */
import type { InspectionEvent, Observer } from 'xstate';

/** What `inspect` options accept: an observer object or a function. */
export type InspectObserver = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

/**
 * Wraps an inspection observer so that a throw inside it is reported, never thrown into XState:
 * XState calls inspectors in the middle of a transition, where an exception would fail the
 * actor (a run, a session, a turn loop) and lose its bookkeeping.
 *
 * @param observer - the user's observer, or `undefined`
 * @param report - where a throw goes (the runtime's `reportError`)
 * @returns a function observer, or `undefined` when there is none
 */
export function guardInspect(
  observer: InspectObserver | undefined,
  report: (error: unknown) => void,
): ((event: InspectionEvent) => void) | undefined {
  if (observer === undefined) return undefined;
  const next =
    typeof observer === 'function' ? observer : (event: InspectionEvent) => observer.next?.(event);
  return (event) => {
    try {
      next(event);
    } catch (error) {
      report(error);
    }
  };
}
