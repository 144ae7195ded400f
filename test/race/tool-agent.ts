/**
 * An agent as its author would write one: a tool loop on a scripted model, safe points after
 * each model reply and tool batch, a nested run, a recovery reply on interrupt; and the six
 * bugs an author plants in such agents, one at a time (issue "race tools with teeth").
 */
import { sleep, type Agent, type RunContext } from '../../src/index.js';
import type { AgentKit } from '../../src/testing/index.js';

/** The bugs, each a realistic slip of an agent author. */
export type AgentBug =
  | 'tool-ignores-signal'
  | 'swallowed-cancel'
  | 'emit-after-cancel'
  | 'no-safe-point'
  | 'nested-ignores-signal'
  | 'interrupt-throws';

/** How long the slow tool and the nested agent take, in simulated ms. */
export const toolMs = 400;

function nestedAgent(bug: AgentBug | undefined, ms: number): Agent<string, string> {
  return {
    async execute(input, ctx) {
      await sleep(ctx.clock, ms, bug === 'nested-ignores-signal' ? undefined : ctx.signal);
      // A sleep can resolve in the very instant a cancel lands: never return over an abort.
      if (bug !== 'nested-ignores-signal') ctx.signal.throwIfAborted();
      return `looked up ${input}`;
    },
  };
}

async function askModel(kit: AgentKit, model: ReturnType<AgentKit['model']>, ctx: RunContext) {
  let text = '';
  for await (const chunk of model.stream([{ role: 'user', content: ctx.runId }], {
    tools: [],
    signal: ctx.signal,
  })) {
    if (chunk.type === 'text') text += chunk.delta;
  }
  void kit;
  return text;
}

/**
 * The agent under test, as a factory of the race property's kit.
 *
 * @param bug - the one bug to plant, or none
 * @param ms - how long its tool call and its nested agent take, in simulated ms
 */
export function toolAgent(bug?: AgentBug, ms = toolMs): (kit: AgentKit) => Agent<string, string> {
  return (kit) => {
    const model = kit.model(Array.from({ length: 500 }, () => ({ text: 'ok', chunkDelayMs: 5 })));
    return {
      async execute(_input, ctx) {
        const { signal } = ctx;
        try {
          // Checked before each model call and each tool batch: an interrupt (or a shutdown)
          // ends the run with what it has.
          const interrupted = () => {
            signal.throwIfAborted();
            if (!ctx.interruptRequested) return false;
            if (bug === 'interrupt-throws') throw new Error('interrupted by the user');
            return true;
          };
          const recovery = 'You interrupted me; here is what I have so far.';
          for (let step = 0; step < 6; step++) {
            if (interrupted()) return recovery;
            const text = await askModel(kit, model, ctx);
            ctx.emit('agent.message', { text: `${text} ${step}` });
            if (bug !== 'no-safe-point') ctx.safePoint('afterChatModel');
            if (interrupted()) return recovery;
            if (step === 0) {
              await ctx.spawn(nestedAgent(bug, ms), 'the weather').result();
            } else {
              await sleep(ctx.clock, ms, bug === 'tool-ignores-signal' ? undefined : signal);
            }
            if (bug !== 'no-safe-point') ctx.safePoint('afterToolCalls');
          }
          signal.throwIfAborted();
          return 'done';
        } catch (error) {
          if (bug === 'swallowed-cancel' && signal.aborted) return 'Sorry, something went wrong.';
          if (bug === 'emit-after-cancel') ctx.emit('agent.error', { message: String(error) });
          throw error;
        }
      },
    };
  };
}
