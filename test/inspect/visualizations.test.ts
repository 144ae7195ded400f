import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, unlinkSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { generateVisualizations } from '../../scripts/viz.js';
import { registeredMachines } from '../../src/inspect/machine-registry.js';
import { runMachine } from '../../machines/run.machine.js';
import { toMermaidStateDiagram } from '../../src/index.js';
import { toMermaidStateDiagramParts } from '../../src/inspect/mermaid-diagram-parts.js';

const root = join(import.meta.dirname, '..', '..');
const npm = (...args: string[]) =>
  promisify(execFile)('npm', ['run', '--silent', ...args], { cwd: root }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );

describe('npm run viz', () => {
  it('viz:check passes: the committed diagrams match the machine definitions', async () => {
    const { code, stdout, stderr } = await npm('viz:check');
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toBe(`visualizations: up to date (${registeredMachines.length} machines)\n`);
  });

  it('viz:check fails, naming each stale file, when the diagrams do not match', async () => {
    const dir = join(root, 'test-artifacts', 'viz-stale');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const name of ['run.mmd', 'session.mmd', 'index.html']) {
      cpSync(join(root, 'visualizations', name), join(dir, name));
    }
    appendFileSync(join(dir, 'run.mmd'), '  QUEUED --> COMPLETED : hand.edit\n');
    writeFileSync(join(dir, 'turn-loop-old.mmd'), 'stateDiagram-v2\n');
    const { code, stderr } = await npm('viz:check', '--', '--dir', dir);
    expect(code).toBe(1);
    expect(stderr).toContain('is stale:');
    expect(stderr).toContain('  - run.mmd differs\n');
    expect(stderr).toContain('  - README.md is missing\n');
    expect(stderr).toContain('  - turn-loop-old.mmd is no longer generated\n');
    expect(stderr).not.toContain('session.mmd');
    expect(stderr).toContain('Run `npm run viz` and commit the result.');
    unlinkSync(join(dir, 'turn-loop-old.mmd'));
  });

  it('generates deterministically: a .mmd per registered machine, a README and an index page', () => {
    const files = generateVisualizations();
    expect(generateVisualizations()).toEqual(files);
    expect([...files.keys()]).toEqual([
      ...registeredMachines.map(({ name }) => `${name}.mmd`),
      'README.md',
      'index.html',
    ]);
    const readme = files.get('README.md')!;
    const index = files.get('index.html')!;
    for (const { name, machine } of registeredMachines) {
      expect(files.get(`${name}.mmd`)).toBe(toMermaidStateDiagram(machine));
      for (const part of toMermaidStateDiagramParts(machine)) {
        expect(readme).toContain(`\`\`\`mermaid\n${part.text}\`\`\``);
        expect(index).toContain(
          `<pre class="mermaid" data-machine="${name}" data-part="${part.path}">`,
        );
      }
    }
    expect(index).not.toMatch(/https?:\/\//); // offline: no CDN
    expect(`${readme}${index}`).not.toMatch(/\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}/); // no timestamps
  });
});

describe('toMermaidStateDiagram', () => {
  it('draws nesting, guards, delays, eventless and targetless transitions', () => {
    const machine = setup({
      guards: { ready: () => true, is: (_, _kind: string) => true },
      delays: { grace: 100 },
    }).createMachine({
      id: 'demo',
      initial: 'a',
      states: {
        a: { on: { go: { target: 'b', guard: 'ready' }, poke: { actions: () => undefined } } },
        b: {
          initial: 'inner',
          on: { stop: 'done' },
          states: {
            inner: {
              on: { up: { target: '#demo.a', guard: { type: 'is', params: 'up' } } },
              after: { grace: 'other' },
            },
            other: { always: [{ guard: () => true, target: '#demo.done' }] },
          },
        },
        done: { type: 'final' },
      },
    });
    expect(toMermaidStateDiagram(machine)).toBe(
      [
        'stateDiagram-v2',
        '  [*] --> a',
        '  state b {',
        '    state "inner" as b_inner',
        '    state "other" as b_other',
        '    [*] --> b_inner',
        '    b_inner --> b_other : after grace',
        '  }',
        '  done --> [*]',
        '  a --> b : go [ready]',
        '  a --> a : poke',
        '  b --> done : stop',
        '  b_inner --> a : up [is up]',
        '  b_other --> done : always [inline guard]',
        '',
      ].join('\n'),
    );
  });

  it('draws the run machine with its cross-level edges', () => {
    const diagram = toMermaidStateDiagram(runMachine);
    expect(diagram).toContain('  QUEUED --> RUNNING : run.admit\n');
    // Admitted as it starts: logged as passing QUEUED, without a step there.
    expect(diagram).toContain(
      '  CREATED --> RUNNING : run.start [isAdmittedWithDeadline]<br/>run.start [isAdmitted]\n',
    );
    // With no nested run to wait for, a run settles in the step its agent returns.
    expect(diagram).toContain(
      '  RUNNING --> settled : agent.done [noNestedRuns]<br/>agent.error [noNestedRuns]\n',
    );
    expect(diagram).toContain(
      '  RUNNING --> cancelling : run.cancel [movesDeadlineEarlier]<br/>run.cancel\n',
    );
    expect(diagram).toContain(
      '  cancelling --> CANCELLED_unwinding : run.deadline<br/>run.cancel [escalatesToImmediate]<br/>run.safe_point [matchesSafePoint]<br/>run.cancel_deadline\n',
    );
    expect(diagram).toContain(
      '  cancelling --> CANCELLED_draining : agent.error [isCancellationError]\n',
    );
    expect(diagram).toContain(
      '    CANCELLED_unwinding --> CANCELLED_draining : agent.done<br/>agent.error<br/>after unwindTimeout\n',
    );
    // Final only once the executor and the nested runs settled.
    expect(diagram).toContain('  CANCELLED_draining --> settled : always [noNestedRuns]\n');
    expect(diagram).toContain('  settled --> [*]\n');
  });

  it('draws one flat part per level, with short labels and the long ones in a legend', () => {
    const machine = setup({
      guards: { a: () => true, b: () => true },
      actors: { job: fromPromise(async () => 1) },
    }).createMachine({
      id: 'demo',
      initial: 'idle',
      states: {
        idle: {
          on: { go: [{ target: 'busy', guard: 'a' }, { target: 'busy', guard: 'b' }, 'busy'] },
        },
        busy: {
          initial: 'work',
          states: {
            work: {
              invoke: { id: 'job', src: 'job', onDone: '#demo.idle', onError: '#demo.idle' },
            },
          },
        },
      },
    });
    const parts = toMermaidStateDiagramParts(machine);
    expect(parts.map((p) => p.path)).toEqual(['', 'busy']);
    expect(parts[0]!.text).toContain('  state "busy ▸" as busy\n');
    expect(parts[0]!.text).toContain('  idle --> busy : ①\n');
    expect(parts[0]!.legend).toEqual([
      { key: '①', from: 'idle', to: 'busy', label: 'go [a | b | else]' },
      { key: '②', from: 'busy', to: 'idle', label: 'job done/error' },
    ]);
    // Inside busy: the state it leaves for is drawn dashed, outside.
    expect(parts[1]!.text).toContain('  state "→ idle" as to_idle\n');
    expect(parts[1]!.text).toContain('  busy_work --> to_idle : ①\n');
    expect(parts[1]!.text).toContain('  class to_idle outside\n');
  });
});
