/**
 * runplane/testing: test your agents and your own machines the way runplane tests itself.
 *
 * A short tour:
 * - {@link createTestClock} is a clock that moves only when the test says so; `advance(ms)` fires
 *   due timers at their own time and lets promise callbacks run in between. Hand it to
 *   `createRuntime({ clock })`.
 * - {@link createScriptedAgent} is a puppet agent: each run's execution waits until the test
 *   completes it, fails it, makes it reach a safe point or emit; it honours or ignores its
 *   signal, as you choose.
 * - {@link runRaceProperty} throws random interleavings of prepare, start, cancel (each mode),
 *   interrupt, timeouts, agent results, session interrupts, cancelAll and shutdown at a runtime
 *   you build, with fast-check's scheduler, and checks runplane's invariants after every step.
 *   A failure names its seed and path; `RACE_SEED`, `RACE_PATH` and `RACE_REPLAY_PATH` replay it.
 *   Given your own agent (`{ agent }`), it drives that agent instead and checks the agent
 *   contract ({@link AgentInvariant}) with no model of yours.
 * - {@link runTurnLoopRaceProperty} does the same for TurnLoops: pushes (preempt, strategy, bursts,
 *   late), stops of each mode, agent results, checkpoint and restart, with item conservation.
 * - {@link getReplayPaths} / {@link replayPaths} generate shortest and simple paths through any
 *   XState machine with `xstate/graph` and replay each against your real system through a
 *   {@link PathAdapter}; {@link getMachineCoverage} tells which states are reachable and which
 *   events each state handles or ignores.
 *
 * `fast-check` is an optional peer dependency of this entry point: only {@link runRaceProperty}
 * and {@link runTurnLoopRaceProperty} need it, and they load it when they run.
 *
 * @module
 */
export { createTestClock } from './test-clock.js';
export type { TestClock } from './test-clock.js';
export { createScriptedAgent } from './scripted-agent.js';
export type {
  ScriptedAbortBehaviour,
  ScriptedAgent,
  ScriptedAgentOptions,
  ScriptedSafePointResult,
} from './scripted-agent.js';
export { getReachableSnapshots, getStatePaths } from './path-traversal.js';
export type { PathOptions } from './path-traversal.js';
export { getEnvironment, withReactions } from './with-reactions.js';
export type { ExecutedAction, ReactionOptions } from './with-reactions.js';
export { getMachineCoverage } from './machine-coverage.js';
export type { EventHandling, MachineCoverage } from './machine-coverage.js';
export {
  getReplayPaths,
  PathMismatchError,
  PathMismatchesError,
  replayPaths,
} from './replay-paths.js';
export type {
  PathAdapter,
  PathKind,
  ReplayablePath,
  ReplayPathsOptions,
  ReplayReport,
} from './replay-paths.js';
export { runRaceProperty, RaceInvariantError, resolveRaceRuns } from './race-property.js';
export type {
  RaceAgentKind,
  RaceHarness,
  RacePropertyOptions,
  RaceReport,
  RaceRuntimeFactory,
} from './race-property.js';
export type { AgentKit, AgentUnderTest } from './agent-race.js';
export type { AgentContractOptions, AgentInvariant, AgentReach } from './agent-contract.js';
export { runTurnLoopRaceProperty } from './turn-loop-race.js';
export type { TurnLoopRacePropertyOptions } from './turn-loop-race.js';
