/**
 * The inspection observer of each runtime, for the actors it does not own itself: a TurnLoop
 * inherits its runtime's `inspect` (docs/architecture.md, "Inspection").
 *
 * @module
 */
import type { InspectionEvent } from 'xstate';

type InspectFunction = (event: InspectionEvent) => void;

const inspectors = new WeakMap<object, InspectFunction>();

/**
 * Records a runtime's (already guarded) inspection observer.
 *
 * @internal
 */
export function setInspectorOf(runtime: object, inspect: InspectFunction | undefined): void {
  if (inspect !== undefined) inspectors.set(runtime, inspect);
}

/**
 * The inspection observer a runtime was created with (`createRuntime({ inspect })`), guarded so
 * that a throw is reported; `undefined` when none.
 *
 * @internal
 */
export function inspectorOf(runtime: object): InspectFunction | undefined {
  return inspectors.get(runtime);
}
