/**
 * Runs the README's embedding example exactly as written (imports of 'runplane' resolve to
 * src/ through the vitest alias) and compares its output with the README's "It prints" block.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { format } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';

const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');

function blockAfter(heading: string, fence: string, from = 0): string {
  const start = readme.indexOf(heading, from);
  expect(start, `README has "${heading}"`).toBeGreaterThanOrEqual(0);
  const open = readme.indexOf('```' + fence + '\n', start);
  const close = readme.indexOf('\n```', open + 4);
  return readme.slice(open + fence.length + 4, close + 1);
}

describe('README', () => {
  afterEach(() => vi.restoreAllMocks());

  it.each([
    ['## Embedding', 'readme-embedding.ts'],
    ['### Nested runs', 'readme-nested-runs.ts'],
    ['## Agents: models, tools, approvals, hints', 'readme-agents.ts'],
    ['## Testing your agents', 'readme-testing.ts'],
    ['## TurnLoop: push, preempt, stop, resume', 'readme-turn-loop.ts'],
  ])(
    'the example under "%s" runs as written and prints what the README says',
    async (heading, name) => {
      const code = blockAfter(heading, 'ts');
      const expected = blockAfter('It prints:', 'text', readme.indexOf(heading))
        .trimEnd()
        .split('\n');
      const dir = join(import.meta.dirname, '..', 'test-artifacts');
      mkdirSync(dir, { recursive: true });
      const file = join(dir, name);
      writeFileSync(file, code);
      const lines: string[] = [];
      vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
        lines.push(format(...args));
      });
      await import(file);
      expect(lines).toEqual(expected);
    },
  );
});
