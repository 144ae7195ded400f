/**
 * toMermaidStateDiagram: a machine definition as a Mermaid `stateDiagram-v2`, drawn from
 * `toDirectedGraph` (xstate/graph). `npm run viz` writes one per registered machine.
 *
 * @module
 */
import type { AnyStateMachine } from 'xstate';
import { toDirectedGraph, type DirectedGraphNode } from 'xstate/graph';

/** @internal A state node as the diagrams read it. */
export interface StateNodeLike {
  readonly id: string;
  readonly key: string;
  readonly type: string;
  readonly machine: { readonly id: string };
  readonly initial?: { readonly target?: readonly StateNodeLike[] };
  readonly always?: readonly TransitionLike[];
}

interface TransitionLike {
  readonly eventType: string;
  readonly target?: readonly StateNodeLike[];
  readonly guard?: unknown;
  readonly delay?: string | number;
}

interface Edge {
  readonly source: string;
  readonly target: string;
  readonly label: string;
}

/** @internal A Mermaid-safe id for a state node: its path under the machine, `_`-joined. */
export const idOf = (node: StateNodeLike): string =>
  node.id
    .slice(node.machine.id.length + 1)
    .replace(/[^A-Za-z0-9_]/g, '_')
    .replace(/^(?=\d)/, 's_');

const guardText = (guard: unknown): string => {
  if (guard === undefined) return '';
  if (typeof guard === 'string') return ` [${guard}]`;
  if (typeof guard === 'function') return ' [inline guard]';
  if (typeof guard === 'object' && guard !== null && 'type' in guard) {
    const { type, params } = guard as { type: unknown; params?: unknown };
    const shown =
      params === undefined || typeof params === 'function' ? '' : ` ${JSON.stringify(params)}`;
    return ` [${String(type)}${shown.replace(/"/g, '')}]`;
  }
  return ' [guard]';
};

const eventText = (transition: TransitionLike, source: StateNodeLike): string => {
  const { eventType } = transition;
  if (transition.delay !== undefined) return `after ${transition.delay}`;
  if (eventType === `xstate.done.state.${source.id}`) return 'done';
  return eventType;
};

/** Mermaid label text: no `:` or `;` (they end a label), no `#` (an entity), no line breaks. */
const clean = (text: string): string => text.replace(/[:;#\n\r]/g, ' ').trim();

/** @internal One transition of a machine, as a diagram draws it. */
export interface DrawnTransition {
  readonly source: StateNodeLike;
  readonly target: StateNodeLike;
  /** `event [guard]`, Mermaid-safe. */
  readonly label: string;
}

/**
 * @internal Every transition of a machine's graph, in definition order: `toDirectedGraph`'s
 * edges, then the eventless (`always`) ones it leaves out; a targetless one targets its source.
 */
export function listTransitions(root: DirectedGraphNode): DrawnTransition[] {
  const rootNode = root.stateNode as unknown as StateNodeLike;
  const out: DrawnTransition[] = [];
  const collect = (graph: DirectedGraphNode) => {
    const source = graph.stateNode as unknown as StateNodeLike;
    if (source !== rootNode) {
      for (const edge of graph.edges) {
        const transition = edge.transition as unknown as TransitionLike;
        const target = edge.target as unknown as StateNodeLike;
        const label = clean(eventText(transition, source) + guardText(transition.guard));
        out.push({ source, target, label });
      }
      for (const transition of source.always ?? []) {
        for (const target of transition.target ?? [source]) {
          out.push({ source, target, label: clean(`always${guardText(transition.guard)}`) });
        }
      }
    }
    for (const child of graph.children) collect(child);
  };
  collect(root);
  return out;
}

/**
 * Draws a machine as a Mermaid state diagram.
 *
 * @remarks
 * Deterministic (definition order, no timestamps), so a generated file only changes with the
 * machine. Compound states become nested `state X { … }` blocks; a transition is written at the
 * level of the lowest state that contains both ends, which Mermaid needs to draw edges into and
 * out of nested states. Labels are `event [guard]`; several transitions between the same two
 * states share one edge, labels joined with `<br/>`. Transitions without a target (actions only)
 * are drawn as self-loops. Eventless (`always`) transitions, which `toDirectedGraph` leaves out,
 * are added from the state nodes and labelled `always`; delayed ones read `after <delay>`.
 * @param machine - any XState v5 machine
 * @returns the diagram text, ending with a newline
 * @throws never for a valid machine
 * @example
 * ```ts
 * writeFileSync('run.mmd', toMermaidStateDiagram(runMachine));
 * ```
 */
export function toMermaidStateDiagram(machine: AnyStateMachine): string {
  const root = toDirectedGraph(machine);
  const rootNode = root.stateNode as unknown as StateNodeLike;
  /** Path of ancestor ids for each state, root first (the root itself excluded). */
  const ancestry = new Map<string, string[]>();
  const edgesAt = new Map<string, Edge[]>(); // container state id ('' = root) → edges

  const index = (graph: DirectedGraphNode, parents: string[]) => {
    for (const child of graph.children) {
      const node = child.stateNode as unknown as StateNodeLike;
      ancestry.set(node.id, parents);
      index(child, [...parents, node.id]);
    }
  };
  index(root, []);

  /** The deepest state that strictly contains both ends ('' = the machine itself). */
  const containerOf = (a: StateNodeLike, b: StateNodeLike): string => {
    const pa = ancestry.get(a.id) ?? [];
    const pb = ancestry.get(b.id) ?? [];
    let common = '';
    for (let i = 0; i < Math.min(pa.length, pb.length) && pa[i] === pb[i]; i++) common = pa[i]!;
    return common;
  };

  const addEdge = (source: StateNodeLike, target: StateNodeLike, label: string) => {
    const at = containerOf(source, target);
    const list = edgesAt.get(at) ?? [];
    edgesAt.set(at, list);
    const from = idOf(source);
    const to = idOf(target);
    const same = list.find((edge) => edge.source === from && edge.target === to);
    if (same !== undefined) {
      list[list.indexOf(same)] = { ...same, label: `${same.label}<br/>${label}` };
    } else list.push({ source: from, target: to, label });
  };

  for (const { source, target, label } of listTransitions(root)) addEdge(source, target, label);

  const lines = ['stateDiagram-v2'];
  const write = (graph: DirectedGraphNode, depth: number) => {
    const pad = '  '.repeat(depth);
    const node = graph.stateNode as unknown as StateNodeLike;
    for (const child of graph.children) {
      const state = child.stateNode as unknown as StateNodeLike;
      const id = idOf(state);
      if (id !== state.key) lines.push(`${pad}state "${state.key}" as ${id}`);
    }
    const initial = node.initial?.target?.[0];
    if (initial !== undefined) lines.push(`${pad}[*] --> ${idOf(initial)}`);
    for (const child of graph.children) {
      const state = child.stateNode as unknown as StateNodeLike;
      const id = idOf(state);
      if (child.children.length > 0) {
        lines.push(`${pad}state ${id} {`);
        write(child, depth + 1);
        lines.push(`${pad}}`);
      }
      if (state.type === 'final') lines.push(`${pad}${id} --> [*]`);
    }
    for (const edge of edgesAt.get(node === rootNode ? '' : node.id) ?? []) {
      lines.push(`${pad}${edge.source} --> ${edge.target} : ${edge.label}`);
    }
  };
  write(root, 1);
  return `${lines.join('\n')}\n`;
}
