/**
 * The telemetry of a runtime, for the parts built on a runtime (a TurnLoop's turn spans), as
 * `runtime-inspector.ts` keeps its inspector.
 *
 * @module
 */
import type { RunTelemetry } from './run-telemetry.js';

const telemetries = new WeakMap<object, RunTelemetry>();

/** @internal Records the telemetry `createRuntime` made for `runtime`. */
export function setTelemetryOf(runtime: object, telemetry: RunTelemetry): void {
  telemetries.set(runtime, telemetry);
}

/** @internal The telemetry of a runtime made by `createRuntime` (`undefined` for another object). */
export function telemetryOf(runtime: object): RunTelemetry | undefined {
  return telemetries.get(runtime);
}
