/**
 * Tools: typed functions a model may call, with zod-validated arguments (docs/architecture.md, "Agents").
 *
 * @module
 */
import { z } from 'zod';
import type { Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import type { RunContext } from '../run/agent.js';
import type { ToolSpec } from './chat-model.js';

/** What a tool's `execute` receives besides its arguments. */
export interface ToolContext {
  /**
   * Aborted when the run is cancelled, when it is interrupted, and when the tool's `timeoutMs`
   * passes. Hand it to fetch, SDKs and child processes.
   */
  readonly signal: AbortSignal;
  /** The run that called the tool. */
  readonly runId: string;
  /** The tool-use id of this call (links `agent.tool_use` and `agent.tool_result`). */
  readonly toolUseId: string;
  /** The runtime's clock: wait on it (see `sleep`) so tests can drive time. */
  readonly clock: Clock;
  /** The run's context, for tools that start nested runs (see {@link agentAsTool}). */
  readonly run: RunContext;
}

/** What {@link defineTool} takes. */
export interface ToolDefinition<TSchema extends z.ZodType, TResult> {
  /** The name the model calls; 1–64 characters of `[A-Za-z0-9_-]`, unique among an agent's tools. */
  readonly name: string;
  /** What the tool does, for the model. */
  readonly description: string;
  /** A zod object schema of the arguments; its JSON Schema is what the model sees. */
  readonly parameters: TSchema;
  /**
   * Runs the tool with validated arguments. Its result is sent to the model: a string as is,
   * anything else as JSON. A throw becomes an error result.
   */
  execute(args: z.output<TSchema>, ctx: ToolContext): Promise<TResult> | TResult;
  /** Whether a call must be approved first (`ctx.requestApproval`). @default false */
  readonly needsApproval?: boolean | ((args: z.output<TSchema>) => boolean);
  /**
   * After this many ms the tool's signal aborts and the model gets a timeout error result
   * (the agent stops waiting for it). A positive number. @default no limit
   */
  readonly timeoutMs?: number;
}

/** The outcome of parsing a call's raw JSON arguments. */
export type ToolArgsParse =
  { readonly ok: true; readonly args: unknown } | { readonly ok: false; readonly error: string };

/** A tool made by {@link defineTool}, as an agent uses it. */
export interface Tool {
  readonly name: string;
  readonly description: string;
  /** What the model sees: name, description and JSON Schema. */
  readonly spec: ToolSpec;
  readonly timeoutMs: number | undefined;
  /** Parses and validates the model's raw JSON arguments. Never throws. */
  parseArgs(raw: string): ToolArgsParse;
  /** Whether this call needs approval. */
  needsApproval(args: unknown): boolean;
  /** Runs the tool on already validated arguments. */
  execute(args: unknown, ctx: ToolContext): Promise<unknown>;
}

const toolName = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Defines a tool.
 *
 * @remarks Invalid arguments from the model (not JSON, or failing the schema) never reach
 * `execute` and never crash the run: the model gets an error result naming the problem and
 * can try again. Every tool gets the run's signal. Tool calls of one model reply run in
 * parallel.
 *
 * @param definition - {@link ToolDefinition}
 * @returns the {@link Tool}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad name, a missing
 *   description or `execute`, a schema that is not a zod object schema, or a bad `timeoutMs`
 * @example
 * ```ts
 * const weather = defineTool({
 *   name: 'weather',
 *   description: 'Current weather of a city',
 *   parameters: z.object({ city: z.string() }),
 *   execute: async ({ city }, { signal }) => fetchWeather(city, signal),
 * });
 * ```
 */
export function defineTool<TSchema extends z.ZodType, TResult>(
  definition: ToolDefinition<TSchema, TResult>,
): Tool {
  const { name, description, parameters, needsApproval, timeoutMs } = definition;
  if (typeof name !== 'string' || !toolName.test(name)) {
    throw new InvalidArgumentError(
      'name',
      `expected \`name\` to be 1-64 characters of [A-Za-z0-9_-], got ${JSON.stringify(name)}`,
    );
  }
  if (typeof description !== 'string' || description === '') {
    throw new InvalidArgumentError(
      'description',
      `expected \`description\` to be a non-empty string, got ${String(description)}`,
    );
  }
  if (typeof definition.execute !== 'function') {
    throw new InvalidArgumentError(
      'execute',
      `expected \`execute\` to be a function, got ${typeof definition.execute}`,
    );
  }
  if (!(parameters instanceof z.ZodType)) {
    throw new InvalidArgumentError(
      'parameters',
      `expected \`parameters\` to be a zod schema, got ${typeof parameters}`,
    );
  }
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new InvalidArgumentError(
      'timeoutMs',
      `expected \`timeoutMs\` to be a positive number of milliseconds, got ${String(timeoutMs)}`,
    );
  }
  if (
    needsApproval !== undefined &&
    typeof needsApproval !== 'boolean' &&
    typeof needsApproval !== 'function'
  ) {
    throw new InvalidArgumentError(
      'needsApproval',
      `expected \`needsApproval\` to be a boolean or a function, got ${typeof needsApproval}`,
    );
  }
  let jsonSchema: Record<string, unknown>;
  try {
    jsonSchema = z.toJSONSchema(parameters);
  } catch (error) {
    throw new InvalidArgumentError(
      'parameters',
      `expected \`parameters\` to be representable as JSON Schema, got an error: ${
        error instanceof Error ? error.message : String(error)
      }`,
    );
  }
  if (jsonSchema.type !== 'object') {
    throw new InvalidArgumentError(
      'parameters',
      `expected \`parameters\` to be a zod object schema, got JSON Schema type ${String(jsonSchema.type)}`,
    );
  }
  delete jsonSchema.$schema;

  return {
    name,
    description,
    spec: { name, description, parameters: jsonSchema },
    timeoutMs,
    parseArgs(raw) {
      let value: unknown;
      try {
        value = raw.trim() === '' ? {} : JSON.parse(raw);
      } catch (error) {
        return {
          ok: false,
          error: `arguments are not valid JSON (${error instanceof Error ? error.message : String(error)})`,
        };
      }
      const result = parameters.safeParse(value);
      if (result.success) return { ok: true, args: result.data };
      return {
        ok: false,
        error: `arguments do not match the schema:\n${z.prettifyError(result.error)}`,
      };
    },
    needsApproval(args) {
      if (typeof needsApproval === 'function') return needsApproval(args as z.output<TSchema>);
      return needsApproval === true;
    },
    async execute(args, ctx) {
      return definition.execute(args as z.output<TSchema>, ctx);
    },
  };
}
