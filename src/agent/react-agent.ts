/**
 * createReActAgent: the reference agent (docs/architecture.md, "Agents"). Reason with a streamed model call, act
 * with tools, repeat; stop cleanly at safe points, on interrupt, at `maxSteps`.
 *
 * @module
 */
import { InvalidArgumentError, RunCancelledError } from '../errors.js';
import type { Agent, RunContext } from '../run/agent.js';
import { parseOptions } from '../validation.js';
import {
  isResumeInput,
  reactOptionsSchema,
  type ReActAgentOptions,
  type ReActResult,
  type ReActResumeInput,
} from './react-agent-options.js';
import { ReActExecution } from './react-execution.js';
import type { Tool } from './tool.js';

export type {
  ReActAgentOptions,
  ReActHistoryMode,
  RecoveryInfo,
  ReActResult,
  ReActResumeInput,
  ReActSafePointState,
  ReActStopReason,
} from './react-agent-options.js';

/** Whether `error` ends the run as a cancel (its signal aborted, or a cancel thrown). */
const isCancelled = (ctx: RunContext, error: unknown) =>
  ctx.signal.aborted || error instanceof RunCancelledError;

/**
 * Creates the reference ReAct agent: its input is the user's message, its output a
 * {@link ReActResult}.
 *
 * @remarks
 * Each step: drain the session inbox into the request (so a hint reaches **that** model call,
 * where AgentScope's can miss it), stream the model (`agent.message_delta` per text chunk,
 * interrupt checked at every chunk, the call aborted by an interrupt or a cancel), log
 * `agent.message`; with tool calls: `agent.tool_use`, `ctx.safePoint('afterChatModel')`, the
 * tools in parallel (approval first when a tool needs it; `agent.tool_result` each),
 * `ctx.safePoint('afterToolCalls')`, next step. Without tool calls the reply is final.
 * After `maxSteps` model calls the run stops with reason `max_steps`. With `streamSafePoints:
 * 'sentence'` a safe point (`afterChatModel`, the reply so far in its state) is also reported
 * each time the streamed text completes a sentence.
 *
 * Resume (a TurnLoop's `genResume`): the input `{ resume: state }` takes the state of the cut
 * run's last safe point ({@link ReActSafePointState}). The resumed run adds no user message and
 * counts its steps on from `state.step`; the session history already holds the turn up to the
 * cut (its cancel saved it), so the model continues from there. With `carried: true` (a
 * cluster's failover, where nothing saved the turn) the state's messages and its partial reply
 * are the turn so far, saved with the rest at the run's end. When the run starts from the
 * state's messages (`carried`, or no session history) and they end with a reply whose tool
 * calls have no result there (an `afterChatModel` safe point: they had not run), it runs those
 * calls first (then `afterToolCalls`), then calls the model; a call the state answers is not
 * run again. From a session history, where the cut saved each such call with a `cancelled`
 * result, it runs them too, asked again in a reply of its own (no text, new call ids
 * `<message id>_<index>`, reported as an `afterChatModel` safe point, so a turn cut again
 * while they run asks them again on its next resume): one id never takes two results.
 *
 * Interrupt (AgentScope's ReActAgent interrupt handling): pending tool calls get error results
 * ("interrupted before it ran"), a recovery reply marked `stop: 'interrupted'` ends the run
 * (reason `interrupted`, run status COMPLETED), and the history is saved; a failed save is a
 * `session.error` event and the reply is still returned. A cancel (immediate or at a safe
 * point) saves what the run produced, with a "cancelled" result for every unfinished tool
 * call, then lets the cancel stand. A failed model call saves likewise and fails the run; so
 * does a reply with two tool calls under one id, refused before any tool runs (a
 * `ModelError`, `MODEL_ERROR`, no status: one id cannot take two results). For the same
 * reason a call whose id the session already asked, or streamed with no or an empty id, is
 * given the id `<message id>_<index>`.
 *
 * @param options - {@link ReActAgentOptions}
 * @returns an {@link Agent} of `string` (the user's message) to {@link ReActResult}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad option or duplicate tool
 *   names; the agent's run fails with it for an input that is not a non-empty string
 *   or a `{ resume: state }` whose `state.step` is an integer 0 or more and `state.messages` a list
 * @example
 * ```ts
 * const agent = createReActAgent({ model, tools: [weather], instructions: 'Be brief.' });
 * const run = runtime.prepare({ ownerId: 'u1', sessionId: 's1', agent, input: 'Weather in Paris?' });
 * run.start();
 * const { reply } = await run.result();
 * ```
 */
export function createReActAgent(
  options: ReActAgentOptions,
): Agent<string | ReActResumeInput, ReActResult> {
  parseOptions(reactOptionsSchema, options, 'options');
  const tools = new Map<string, Tool>();
  for (const tool of options.tools ?? []) {
    if (tools.has(tool.name)) {
      throw new InvalidArgumentError(
        'tools',
        `expected \`tools\` to have unique names, got ${JSON.stringify(tool.name)} twice`,
      );
    }
    tools.set(tool.name, tool);
  }
  const mode = options.history ?? 'auto';

  return {
    async execute(input: string | ReActResumeInput, ctx: RunContext): Promise<ReActResult> {
      if ((typeof input !== 'string' || input === '') && !isResumeInput(input)) {
        throw new InvalidArgumentError(
          'input',
          `expected \`input\` to be a non-empty string or { resume: state }, got ${typeof input === 'string' ? '""' : typeof input}`,
        );
      }
      const saveHistory = mode === 'session' || (mode === 'auto' && ctx.parentRunId === undefined);
      const past = saveHistory ? await ctx.history.load() : [];
      const execution = new ReActExecution(options, ctx, tools, past, saveHistory, input);
      // An immediate cancel saves at once: the agent may still wait for a tool that ignores
      // its signal (and be abandoned), but what the run produced is kept.
      const onAbort = () => void execution.save('cancelled');
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      try {
        if (ctx.signal.aborted) throw ctx.signal.reason;
        return await execution.run();
      } catch (error) {
        await execution.save(isCancelled(ctx, error) ? 'cancelled' : 'failed');
        throw error;
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
      }
    },
  };
}
