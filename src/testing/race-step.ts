/**
 * What every command of a race property shares (internal to `runplane/testing`): the model
 * the commands' `check` sees, how a command picks its run, and the step that runs a command,
 * records it in the trace and checks the world's invariants after it.
 *
 * @internal
 * @module
 */
import type fc from 'fast-check';
import type { Licence, RaceWorld, RunRecord } from './race-world.js';

/**
 * The statuses a run ends in, written here from the README's lifecycle rather than
 * imported from the run machine: the worlds judge the runtime with a set it does not share.
 */
const endedStatuses: ReadonlySet<string> = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/** What the commands' `check` sees: enough to know which commands make sense. */
export interface RaceModel {
  runs: number;
  shutdown: boolean;
}

export type RaceCommand = fc.AsyncCommand<RaceModel, RaceWorld>;

export const isTerminalStatus = (status: string): boolean => endedStatuses.has(status);

/**
 * Which runs a command picks from: `relevant` ones (a start picks an unstarted run, a cancel a
 * live one, an agent step an executing one) or `any` run, to cover the useless and late calls.
 */
export type Scope = 'relevant' | 'any';

/** The run a command targets; deterministic for a given sequence and interleaving. */
export const target = (
  world: RaceWorld,
  index: number,
  scope: Scope,
  relevant: (record: RunRecord) => boolean,
): RunRecord | undefined => {
  const all = [...world.records.values()];
  const candidates = scope === 'any' ? all : all.filter(relevant);
  const from = candidates.length > 0 ? candidates : all;
  return from.length === 0 ? undefined : from[index % from.length];
};

export const isLiveRecord = (record: RunRecord): boolean => !isTerminalStatus(record.run.status);

export const licenceAll = (records: Iterable<RunRecord>, licence: Licence): void => {
  for (const record of records) record.licences.add(licence);
};

export abstract class Step implements RaceCommand {
  /** The run or session this execution picked; commands are re-run while shrinking. */
  protected label = '';
  check(model: Readonly<RaceModel>): boolean {
    return model.runs > 0;
  }
  async run(model: RaceModel, world: RaceWorld): Promise<void> {
    this.label = '';
    this.act(model, world);
    const step = this.toString();
    world.trace.push(step);
    await world.clock.flush();
    world.checkStep(step);
  }
  protected abstract act(model: RaceModel, world: RaceWorld): void;
  abstract toString(): string;
}

/** A cancel mode's name, for step labels. */
export const modeName = (mode: number): string =>
  ['immediate', 'afterChatModel', 'afterToolCalls', 'anySafePoint'][mode] ?? String(mode);
