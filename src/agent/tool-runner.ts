/**
 * Runs one tool call of a model reply: parse, approve, execute, time out, into a tool result
 * (internal to the ReAct agent).
 *
 * @module
 */
import type { RunContext } from '../run/agent.js';
import type { ToolCall, ToolMessage } from './messages.js';
import type { Tool } from './tool.js';

/** How a tool call ended; reported in `agent.tool_result` as `status`. */
export type ToolResultStatus =
  | 'ok'
  | 'error'
  | 'unknown_tool'
  | 'invalid_arguments'
  | 'denied'
  | 'timeout'
  | 'interrupted'
  | 'cancelled';

/** A tool call's result and how it ended. */
export interface ToolOutcome {
  readonly message: ToolMessage;
  readonly status: ToolResultStatus;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** @internal A tool result for `call`. */
export function toolResult(call: ToolCall, status: ToolResultStatus, content: string): ToolOutcome {
  return {
    status,
    message: {
      role: 'tool',
      toolCallId: call.id,
      name: call.name,
      content,
      isError: status !== 'ok',
    },
  };
}

/** What the result of a call that never ran says, by why it did not run. */
export const notRunContent = {
  interrupted: 'Error: the run was interrupted before this tool call ran.',
  cancelled: 'Error: the run was cancelled before this tool call finished.',
  failed: 'Error: the run failed before this tool call finished.',
} as const;

const serialize = (value: unknown): string => {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value) ?? '';
};

/**
 * @internal Runs `call` with `tool`. Resolves with a result for every way the call can end,
 * except a cancel of the run: then it rejects with the run signal's reason.
 *
 * @param signal - the tools' signal: the run's signal and its interrupt signal
 */
export async function runToolCall(
  call: ToolCall,
  tool: Tool | undefined,
  ctx: RunContext,
  signal: AbortSignal,
): Promise<ToolOutcome> {
  const stopped = (): ToolOutcome | undefined => {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    return ctx.interruptSignal.aborted
      ? toolResult(call, 'interrupted', notRunContent.interrupted)
      : undefined;
  };
  if (tool === undefined) {
    return toolResult(
      call,
      'unknown_tool',
      `Error: there is no tool named ${JSON.stringify(call.name)}.`,
    );
  }
  const parsed = tool.parseArgs(call.arguments);
  if (!parsed.ok) {
    return toolResult(
      call,
      'invalid_arguments',
      `Error: invalid arguments for ${call.name}: ${parsed.error}`,
    );
  }
  const before = stopped();
  if (before !== undefined) return before;

  let needsApproval: boolean;
  try {
    needsApproval = tool.needsApproval(parsed.args);
  } catch (error) {
    return toolResult(
      call,
      'error',
      `Error: could not decide whether ${call.name} needs approval: ${messageOf(error)}`,
    );
  }
  if (needsApproval) {
    let decision;
    try {
      decision = await ctx.requestApproval(
        { toolUseId: call.id, name: call.name, args: parsed.args },
        { signal },
      );
    } catch (error) {
      const outcome = stopped();
      if (outcome !== undefined) return outcome;
      return toolResult(call, 'error', `Error: approval failed: ${messageOf(error)}`);
    }
    if (!decision.allow) {
      const who = decision.reason === 'timeout' ? 'nobody approved' : 'the user denied';
      return toolResult(
        call,
        'denied',
        `Error: ${who} this tool call${decision.message ? `: ${decision.message}` : '.'}`,
      );
    }
  }

  const timeout = new AbortController();
  const toolSignal =
    tool.timeoutMs === undefined ? signal : AbortSignal.any([signal, timeout.signal]);
  let timer: unknown;
  const timedOut =
    tool.timeoutMs === undefined
      ? undefined
      : new Promise<ToolOutcome>((resolve) => {
          const timeoutMs = tool.timeoutMs ?? 0;
          timer = ctx.clock.setTimeout(() => {
            timeout.abort(new DOMException(`tool timed out after ${timeoutMs} ms`, 'TimeoutError'));
            resolve(
              toolResult(call, 'timeout', `Error: ${call.name} timed out after ${timeoutMs} ms.`),
            );
          }, timeoutMs);
        });
  const running = (async (): Promise<ToolOutcome> => {
    try {
      const value = await tool.execute(parsed.args, {
        signal: toolSignal,
        runId: ctx.runId,
        toolUseId: call.id,
        clock: ctx.clock,
        run: ctx,
      });
      return toolResult(call, 'ok', serialize(value));
    } catch (error) {
      const outcome = stopped();
      if (outcome !== undefined) {
        return toolResult(
          call,
          'interrupted',
          `Error: the run was interrupted while ${call.name} ran: ${messageOf(error)}`,
        );
      }
      return toolResult(call, 'error', `Error: ${call.name} failed: ${messageOf(error)}`);
    }
  })();
  try {
    // A tool that outlives its timeout is left behind (its late result is dropped); a tool that
    // outlives a cancel is waited for, so the run reports it as unsettled (docs/architecture.md, "A run's life").
    return await (timedOut === undefined ? running : Promise.race([running, timedOut]));
  } finally {
    if (timer !== undefined) ctx.clock.clearTimeout(timer);
  }
}
