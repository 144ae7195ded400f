/**
 * agentAsTool: a sub-agent as a tool. The child runs as a nested run (`ctx.spawn`), so a
 * recursive cancel of the parent reaches it (docs/architecture.md, "The actor tree", the Temporal cancellation tree).
 *
 * @module
 */
import { z } from 'zod';
import { InvalidArgumentError } from '../errors.js';
import type { Agent } from '../run/agent.js';
import { defineTool, type Tool } from './tool.js';

/** Options of {@link agentAsTool}. */
export interface AgentAsToolOptions<TSchema extends z.ZodType, TInput, TOutput> {
  /** The tool name the model calls. */
  readonly name: string;
  /** What the sub-agent does, for the model. */
  readonly description: string;
  /** The sub-agent, run as a nested run of the calling run. */
  readonly agent: Agent<TInput, TOutput>;
  /** The arguments' schema. @default `z.object({ input: z.string() })` */
  readonly parameters?: TSchema;
  /** Turns the arguments into the sub-agent's input. @default `args.input` */
  readonly toInput?: (args: z.output<TSchema>) => TInput;
  /** Turns the sub-agent's output into the tool result. @default its `reply` field, or the output itself */
  readonly toResult?: (output: TOutput) => unknown;
  /** The nested run's total budget, in ms. @default none */
  readonly timeoutMs?: number;
  /** Whether a call must be approved first. @default false */
  readonly needsApproval?: boolean;
}

const defaultParameters = z.object({ input: z.string().describe('The task for the sub-agent') });

const defaultResult = (output: unknown): unknown =>
  typeof output === 'object' &&
  output !== null &&
  typeof (output as { reply?: unknown }).reply === 'string'
    ? (output as { reply: string }).reply
    : output;

/**
 * Wraps an agent as a tool: each call starts a nested run of `agent` with `ctx.spawn` and
 * returns its output to the model.
 *
 * @remarks A cancel of the calling run (recursive, which an immediate cancel is by default)
 * cancels the nested run; an interrupt of the calling run interrupts it, so a ReAct sub-agent
 * ends with its recovery reply. A nested ReAct agent with `history: 'auto'` does not touch
 * the session history. A nested run that fails or is cancelled gives the model an error
 * result.
 *
 * @param options - {@link AgentAsToolOptions}
 * @returns the {@link Tool}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a missing agent, or what
 *   {@link defineTool} throws
 * @example
 * ```ts
 * const research = agentAsTool({ name: 'research', description: 'Researches a topic', agent: researcher });
 * const lead = createReActAgent({ model, tools: [research] });
 * ```
 */
export function agentAsTool<
  TInput = string,
  TOutput = unknown,
  TSchema extends z.ZodType = typeof defaultParameters,
>(options: AgentAsToolOptions<TSchema, TInput, TOutput>): Tool {
  if (typeof options.agent?.execute !== 'function') {
    throw new InvalidArgumentError(
      'agent',
      'expected `agent` to be an agent with an execute(input, ctx) method, got ' +
        typeof options.agent,
    );
  }
  const toInput =
    options.toInput ?? ((args: z.output<TSchema>) => (args as { input: unknown }).input as TInput);
  const toResult = options.toResult ?? defaultResult;
  return defineTool({
    name: options.name,
    description: options.description,
    parameters: (options.parameters ?? defaultParameters) as TSchema,
    needsApproval: options.needsApproval ?? false,
    async execute(args, ctx) {
      const child = ctx.run.spawn(options.agent, toInput(args), {
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      });
      const onAbort = () => {
        if (ctx.run.signal.aborted) child.cancel({ reason: 'parent run cancelled' });
        else if (ctx.run.interruptSignal.aborted) {
          child.interrupt(ctx.run.interruptMessage ?? 'parent run interrupted');
        } else child.cancel({ reason: 'tool timed out' });
      };
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener('abort', onAbort, { once: true });
      try {
        return toResult(await child.result());
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
      }
    },
  });
}
