/**
 * A bad command line (README "Quick start"): exit code 2, the problem, then one line pointing to
 * `--help`; never the whole usage, which would bury the problem.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './process-helpers.js';

const hint = 'see `runplane --help` for every command, flag and environment variable\n';

function cli(...args: string[]) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('runplane command line errors', () => {
  it.each([
    [['bogus'], 'unknown command: bogus\n'],
    [['demo', '--step-ms', 'x'], 'expected `--step-ms` to be a positive number, got x\n'],
    [['timeline'], 'timeline: expected a trace file\n'],
  ])('%j: exit code 2, the problem and the hint only', (args, problem) => {
    expect(cli(...args)).toEqual({ code: 2, stdout: '', stderr: `${problem}${hint}` });
  });

  it('an unknown flag is a bad flag too (exit code 2), not an uncaught error', () => {
    const { code, stderr } = cli('demo', '--nope');
    expect(code).toBe(2);
    expect(stderr).toMatch(/^Unknown option '--nope'.*\n/);
    expect(stderr.endsWith(`\n${hint}`)).toBe(true);
    expect(stderr.split('\n')).toHaveLength(3);
  });
});
