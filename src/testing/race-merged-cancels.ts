/**
 * A race command that aims two safe-point cancels at one executing run in the same step, then
 * lets its agent reach a safe point (internal to `runplane/testing`): where the merged cancel
 * lands (`[safe-point-lands]`) and when it escalates (`[escalation-at-deadline]`) are then
 * checked by the world's obligations. Random single cancels reach this case too seldom.
 *
 * @internal
 * @module
 */
import type { SafePointKind } from '../../machines/cancel-request.js';
import { modeName, Step, target, type RaceModel } from './race-step.js';
import type { RaceWorld } from './race-world.js';

/** One safe-point request of the pair: its mode and escalation, in ms after the step. */
export interface SafePointRequest {
  readonly mode: number;
  readonly timeoutMs: number | undefined;
}

/** @internal Two safe-point cancels on one executing run, then one safe point of its agent. */
export class MergedCancels extends Step {
  constructor(
    readonly index: number,
    readonly first: SafePointRequest,
    readonly second: SafePointRequest,
    readonly point: SafePointKind,
  ) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const record = target(
      world,
      this.index,
      'relevant',
      (r) => r.run.status === 'RUNNING' && world.agents[r.kind].isExecuting(r.run.id),
    );
    if (record === undefined || record.run.status !== 'RUNNING') return;
    if (!world.agents[record.kind].isExecuting(record.run.id)) return;
    this.label = record.run.id;
    record.licences.add('cancel');
    for (const request of [this.first, this.second]) {
      const now = world.clock.now();
      world.obligations.safePointCancel(
        record,
        request.mode,
        request.timeoutMs === undefined ? undefined : now + request.timeoutMs,
        `cancel(${describe(request)})`,
      );
      record.run.cancel({
        mode: request.mode,
        reason: 'race',
        ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
      });
    }
    const statusBefore = record.run.status;
    const answer = world.agents[record.kind].safePoint(record.run.id, this.point);
    const broken = world.obligations.checkSafePoint(record, this.point, statusBefore, answer);
    if (broken !== undefined) world.violation(broken);
  }
  toString(): string {
    return `cancel(${this.label || `#${this.index}`}, ${describe(this.first)}) + cancel(${describe(this.second)}), then safePoint ${this.point}`;
  }
}

const describe = (request: SafePointRequest): string =>
  `${modeName(request.mode)}${request.timeoutMs === undefined ? '' : `, escalate after ${request.timeoutMs}ms`}`;
