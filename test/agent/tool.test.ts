import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/agent/tool.js';

const base = {
  name: 'lookup',
  description: 'Looks up',
  parameters: z.object({ id: z.string().describe('The id'), limit: z.number().int().optional() }),
  execute: ({ id }: { id: string }) => id,
};

describe('defineTool', () => {
  it('exposes a JSON Schema object of its parameters', () => {
    const tool = defineTool(base);
    expect(tool.spec).toEqual({
      name: 'lookup',
      description: 'Looks up',
      parameters: {
        type: 'object',
        properties: {
          id: { type: 'string', description: 'The id' },
          limit: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
        },
        required: ['id'],
        additionalProperties: false,
      },
    });
  });

  it('parses raw arguments, never throwing: bad JSON and schema misses are errors', () => {
    const tool = defineTool(base);
    expect(tool.parseArgs('{"id":"a"}')).toEqual({ ok: true, args: { id: 'a' } });
    expect(tool.parseArgs('{"id":')).toMatchObject({
      ok: false,
      error: expect.stringContaining('not valid JSON') as string,
    });
    const miss = tool.parseArgs('{"limit":1.5}');
    expect(miss.ok).toBe(false);
    if (!miss.ok) {
      expect(miss.error).toContain('id');
      expect(miss.error).toContain('limit');
    }
    // An empty argument string means no arguments.
    const none = defineTool({ ...base, parameters: z.object({}), execute: () => 'none' });
    expect(none.parseArgs('')).toEqual({ ok: true, args: {} });
  });

  it('rejects bad definitions with INVALID_ARGUMENT naming the field', () => {
    expect(() => defineTool({ ...base, name: 'has space' })).toThrow(
      /INVALID_ARGUMENT: expected `name`/,
    );
    expect(() => defineTool({ ...base, description: '' })).toThrow(/expected `description`/);
    expect(() => defineTool({ ...base, parameters: z.string(), execute: (s) => s })).toThrow(
      /zod object schema/,
    );
    expect(() => defineTool({ ...base, parameters: {} as never })).toThrow(
      /expected `parameters` to be a zod schema/,
    );
    expect(() => defineTool({ ...base, timeoutMs: 0 })).toThrow(
      /expected `timeoutMs` to be a positive number/,
    );
    expect(() => defineTool({ ...base, execute: undefined as never })).toThrow(
      /expected `execute`/,
    );
  });
});
