/**
 * Replays the README's curl walkthrough, block by block, with bash, curl and jq, against
 * `startServer` on a real socket (the default demo agent, on a simulated clock so that the run
 * is still streaming when the walkthrough stops it). Each block's output is compared with the
 * README's (`…` matches ids and times). `<!-- replay: ... -->` comments tell the replay what a
 * reader does by waiting: `setup` (the test provides BASE_URL and TOKEN), `stream` (the block
 * runs until its output shows what the README shows, then is stopped like Ctrl-C), `wait for
 * <type>` (the block waits by itself until the current run logged that event: the replay starts
 * it, lets its first request be answered with the clock held, so the event is not there yet,
 * then moves the clock until the event is logged; a block that did not wait prints too early).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server/serve.js';
import { flush } from './helpers.js';
import { repoRoot } from './process-helpers.js';

interface Step {
  readonly directive: string | undefined;
  readonly script: string;
  readonly expected: string | undefined;
}

/** The walkthrough's shell blocks, each with the directive before it and the output after it. */
function walkthroughSteps(readme: string): Step[] {
  const start = readme.indexOf('## HTTP API walkthrough');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end);
  const tokens = [...section.matchAll(/<!-- replay: (.+?) -->|```(\w+)\n([\s\S]*?)```/g)].map(
    (m) => (m[1] !== undefined ? { directive: m[1] } : { lang: m[2], body: m[3] ?? '' }),
  );
  const steps: Step[] = [];
  let directive: string | undefined;
  tokens.forEach((token, i) => {
    if ('directive' in token) {
      directive = token.directive;
      return;
    }
    if (token.lang !== 'sh') return;
    const next = tokens[i + 1];
    const expected =
      next !== undefined && 'lang' in next && next.lang === 'text' ? next.body : undefined;
    steps.push({ directive, script: token.body, expected });
    directive = undefined;
  });
  return steps;
}

/** `…` matches anything within a line; a line that is only `…` matches any lines. */
function outputPattern(expected: string, prefixOnly: boolean): RegExp {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const body = expected
    .trimEnd()
    .split('\n')
    .map((line) =>
      line === '…' ? '(?:[^\\n]*\\n)*?' : `${escape(line).replace(/…/g, '[^\\n]*?')}\\n`,
    )
    .join('');
  return new RegExp(`^${body}${prefixOnly ? '' : '$'}`);
}

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const steps = walkthroughSteps(readme);
const variables = [
  ...new Set(
    steps.flatMap((step) => [...step.script.matchAll(/^([A-Z_][A-Z0-9_]*)=/gm)].map((m) => m[1])),
  ),
];

let server: RunningServer | undefined;
let dir: string | undefined;
afterAll(async () => {
  await server?.shutdown({ graceMs: 0 });
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('README curl walkthrough', () => {
  it('has the steps the issue asks for', () => {
    const scripts = steps.map((step) => step.script).join('\n');
    expect(scripts).toContain('/api/sessions"'); // create a session
    expect(scripts).toContain('"type":"user.message"'); // send
    expect(scripts).toContain('/events/stream'); // stream
    expect(scripts.match(/user\.interrupt.*run_id/g)).toHaveLength(2); // stop by run_id, stale stop
    expect(scripts).toContain('user.tool_confirmation'); // a tool confirmation
    expect(steps[0]?.directive).toBe('setup');
  });

  it('runs as written against a real socket and prints what the README shows', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-walkthrough-'));
    const clock = new SimulatedClock();
    const chunkDelayMs = 60;
    server = await startServer({
      port: 0,
      dbPath: join(dir, 'runplane.db'),
      clock,
      chunkDelayMs,
      log: () => undefined,
    });
    const s = server;
    const state = join(dir, 'state.sh');
    writeFileSync(state, `BASE_URL=${s.url}\nTOKEN=${s.devToken ?? ''}\n`);
    const read = (name: string) =>
      new RegExp(`^declare -- ${name}="(.*)"$`, 'm').exec(readFileSync(state, 'utf8'))?.[1] ?? '';
    // Counts the block's answered curl requests (one line each), for `wait for` steps.
    const answered = join(dir, 'answered');
    const countCurl = `curl() { command curl "$@" && echo >> "${answered}"; }\n`;
    const runBlock = (script: string, prelude = '') =>
      spawn(
        'bash',
        [
          '-c',
          `set -euo pipefail\nsource "${state}"\n${prelude}${script}\n` +
            `{ declare -p ${variables.join(' ')} 2>/dev/null || true; } > "${state}.next"`,
        ],
        { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
      );
    const advance = async () => {
      clock.increment(chunkDelayMs);
      await flush(2);
    };

    for (const [index, step] of steps.entries()) {
      if (step.directive === 'setup') continue;
      const label = `step ${index}: ${step.script.split('\n')[0]}`;
      const waitFor = /^wait for (\S+)$/.exec(step.directive ?? '')?.[1];
      rmSync(answered, { force: true });
      const child = runBlock(step.script, waitFor === undefined ? '' : countCurl);
      let stdout = '';
      let stderr = '';
      let wake: (() => void) | undefined;
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
        wake?.();
      });
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | null>((resolve) =>
        child.once('exit', (code) => {
          resolve(code);
          wake?.();
        }),
      );

      if (waitFor !== undefined) {
        const key = { ownerId: 'dev', sessionId: read('SESSION_ID') };
        const runId = read('RUN_ID');
        const logged = async () =>
          (await s.runtime.eventLog.read({}, key, { runId, types: [waitFor] })).length > 0;
        // The block's first request is answered before the clock moves: the event is not there.
        for (let i = 0; i < 1_000 && !existsSync(answered) && child.exitCode === null; i++) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        expect([label, await logged()]).toEqual([label, false]);
        for (let i = 0; i < 1_000 && !(await logged()); i++) await advance();
        expect([label, await logged()]).toEqual([label, true]);
      }

      if (step.directive === 'stream') {
        const pattern = outputPattern(step.expected ?? '', true);
        const key = { ownerId: 'dev', sessionId: read('SESSION_ID') };
        for (let i = 0; i < 1_000 && !pattern.test(stdout); i++) {
          // Time moves only once the reader has everything logged so far.
          if (stdout.includes(`id: ${s.runtime.eventLog.lastSeq({}, key)}\n`)) await advance();
          else await new Promise<void>((resolve) => (wake = resolve));
        }
        process.kill(-(child.pid ?? 0), 'SIGTERM'); // Ctrl-C
        await exited;
        expect([label, stdout]).toEqual([label, expect.stringMatching(pattern) as string]);
        continue;
      }
      const code = await exited;
      expect([label, code, stderr]).toEqual([label, 0, '']);
      writeFileSync(state, readFileSync(`${state}.next`, 'utf8'));
      if (step.expected !== undefined) {
        const pattern = outputPattern(step.expected, false);
        expect([label, `${stdout.trimEnd()}\n`]).toEqual([
          label,
          expect.stringMatching(pattern) as string,
        ]);
      }
    }
    // The stop reached the first run only; the second completed with the clock's answer.
    expect(readFileSync(state, 'utf8')).toMatch(/TOOL_USE_ID="toolu_/);
  });
});
