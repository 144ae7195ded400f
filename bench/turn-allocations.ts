/**
 * Where a preempted turn's heap goes (issue 15), over the counted turns of
 * bench/turn-steps.bench.ts, two ways:
 * - `bySteps`: the heap each machine's steps allocate, by machine and event, exclusive of the
 *   steps nested in them (a turn's run starting inside the turn's step) and inclusive;
 * - `byFunction` / `byOwnFrame` / `byXStateFrame`: V8's sampling heap profiler, its samples
 *   summed by the allocating function, and by the nearest frame in runplane's own code (src/,
 *   machines/) or in XState.
 *
 * Run with `node --enable-source-maps --expose-gc --min-semi-space-size=256
 * --max-semi-space-size=256 --import tsx bench/turn-allocations.ts [turns] [warmup] [top]`: with
 * no scavenge inside the counted turns, every sampled object is still live when the profile is
 * taken (the profile counts what was allocated, not what survived), and heap deltas are
 * allocations. Sizes are bytes per turn; sampling makes the profiler's estimates.
 * `TURN_ALLOCATIONS_PROFILE=<file>` also writes the whole profile (DevTools, Memory → Load).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { findSourceMap } from 'node:module';
import { StateMachine } from 'xstate';

type CallFrame = { functionName: string; url: string; lineNumber: number; columnNumber: number };

interface ProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children: ProfileNode[];
}

/** A frame's short name: function, file and line (1-based; TypeScript's own, by its source map). */
const frameName = ({ functionName, url, lineNumber, columnNumber }: CallFrame) => {
  const entry: { originalLine?: number } | undefined =
    url === '' ? undefined : findSourceMap(url)?.findEntry(lineNumber, columnNumber);
  const line = (entry?.originalLine ?? lineNumber) + 1;
  const file = url.replace(/^.*\/(node_modules\/)?/, '');
  return `${functionName || '(anonymous)'} ${file}:${line}`;
};

const ownCode = (url: string) => /\/(src|machines)\//.test(url) && !url.includes('node_modules');
const xstateCode = (url: string) => url.includes('node_modules/xstate/');

/** Sums `selfSize` by key over the tree; `key` sees the frame and its callers (outermost first). */
function sumBy(root: ProfileNode, key: (stack: readonly CallFrame[]) => string) {
  const sums = new Map<string, number>();
  const walk = (node: ProfileNode, stack: CallFrame[]) => {
    stack.push(node.callFrame);
    if (node.selfSize > 0) {
      const k = key(stack);
      sums.set(k, (sums.get(k) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, stack);
    stack.pop();
  };
  walk(root, []);
  return sums;
}

const nearest = (stack: readonly CallFrame[], is: (url: string) => boolean) => {
  for (let i = stack.length - 1; i >= 0; i--) {
    const frame = stack[i] as CallFrame;
    if (is(frame.url)) return frameName(frame);
  }
  return '(none)';
};

type Step = (this: { id: string }, ...args: unknown[]) => unknown;

/**
 * Wraps every machine's `transition` and `getInitialSnapshot` (before any machine is built: a
 * machine binds them as it is constructed) to sum the heap each step allocates while `on()`.
 */
function stepHeap(on: () => boolean) {
  const proto = StateMachine.prototype as unknown as Record<
    'transition' | 'getInitialSnapshot',
    Step
  >;
  const sums = new Map<string, { exclusive: number; inclusive: number; steps: number }>();
  const open: { start: number; nested: number }[] = [];
  const wrap = (step: Step, eventOf: (args: unknown[]) => string): Step =>
    function (this: { id: string }, ...args: unknown[]) {
      if (!on()) return step.apply(this, args);
      const frame = { start: process.memoryUsage().heapUsed, nested: 0 };
      open.push(frame);
      try {
        return step.apply(this, args);
      } finally {
        open.pop();
        const allocated = process.memoryUsage().heapUsed - frame.start;
        const key = `${this.id} ${eventOf(args)}`;
        const sum = sums.get(key) ?? { exclusive: 0, inclusive: 0, steps: 0 };
        sums.set(key, {
          exclusive: sum.exclusive + allocated - frame.nested,
          inclusive: sum.inclusive + allocated,
          steps: sum.steps + 1,
        });
        const outer = open[open.length - 1];
        if (outer !== undefined) outer.nested += allocated;
      }
    };
  proto.transition = wrap(proto.transition, (args) => (args[1] as { type: string }).type);
  proto.getInitialSnapshot = wrap(proto.getInitialSnapshot, () => '(initial state)');
  return sums;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [turns = 200, warmup = 2_500, top = 25] = process.argv.slice(2).map(Number);
  let stepping = false;
  const steps = stepHeap(() => stepping);
  // Imported after `stepHeap`: the machines are built as their modules load.
  const { preemptedTurns } = await import('./turn-steps.bench.js');
  await preemptedTurns(turns, warmup, false, {
    begin: () => void (stepping = true),
    end: () => void (stepping = false),
  });
  const session = new Session();
  session.connect();
  let profile: { head: unknown } | undefined;
  await preemptedTurns(turns, warmup, false, {
    async begin() {
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 256,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    },
    async end() {
      ({ profile } = await session.post('HeapProfiler.stopSampling'));
    },
  });
  session.disconnect();
  if (process.env.TURN_ALLOCATIONS_PROFILE !== undefined) {
    writeFileSync(process.env.TURN_ALLOCATIONS_PROFILE, JSON.stringify(profile));
  }
  const head = profile?.head as ProfileNode;
  const perTurn = (bytes: number) => Math.round(bytes / turns);
  const table = (sums: Map<string, number>) =>
    Object.fromEntries(
      [...sums]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, v]) => [k, perTurn(v)]),
    );
  const stepRows = [...steps].sort((a, b) => b[1].exclusive - a[1].exclusive);
  console.log(
    JSON.stringify(
      {
        stepBytesPerTurn: perTurn(stepRows.reduce((n, [, s]) => n + s.exclusive, 0)),
        bySteps: Object.fromEntries(
          stepRows.map(([k, s]) => [
            k,
            {
              exclusive: perTurn(s.exclusive),
              inclusive: perTurn(s.inclusive),
              steps: s.steps / turns,
            },
          ]),
        ),
        sampledBytesPerTurn: perTurn([...sumBy(head, () => 'all').values()][0] ?? 0),
        byFunction: table(sumBy(head, (s) => frameName(s[s.length - 1] as CallFrame))),
        byOwnFrame: table(sumBy(head, (s) => nearest(s, ownCode))),
        byXStateFrame: table(sumBy(head, (s) => nearest(s, xstateCode))),
      },
      null,
      2,
    ),
  );
}
