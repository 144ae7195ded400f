/**
 * toMermaidStateDiagramParts: a machine as flat Mermaid diagrams, one for its top level and one
 * for each compound or parallel state, so that no layout engine has to nest boxes.
 *
 * @remarks Mermaid's default layout (dagre) draws the states of a nested `state X { … }` block
 * outside X's box once edges cross its border, and piles up the labels of edges that leave it.
 * A flat graph it lays out cleanly. So each part draws one level: its child states (a compound
 * child as one box, marked `▸`, with its own part), its initial and final markers, the
 * transitions between them, and, dashed, the states outside it that its transitions leave for.
 * Labels are short: one event's guarded alternatives read `event [g1 | g2 | else]`, and an
 * actor's done and error events `id done/error`; a longer label is a key (`①`) on its edge,
 * written out in the part's legend, since long labels are what overlap. `npm run viz` draws these in
 * `visualizations/`; the whole nested chart is still `toMermaidStateDiagram`.
 *
 * @module
 */
import type { AnyStateMachine } from 'xstate';
import { toDirectedGraph, type DirectedGraphNode } from 'xstate/graph';
import { idOf, listTransitions, type StateNodeLike } from './mermaid-diagram.js';

/** One flat diagram of a machine. */
export interface MermaidDiagramPart {
  /** `''` for the top level, else the state's path under the machine (`active`, `loop.exiting`). */
  readonly path: string;
  /** The Mermaid `stateDiagram-v2` text, ending with a newline. */
  readonly text: string;
  /** The long labels, drawn as keys (`①`) on their edges and written out here, in key order. */
  readonly legend: readonly MermaidLegendEntry[];
}

/** A long edge label, written out under its diagram. */
export interface MermaidLegendEntry {
  /** What the edge shows: `①`, `②`, … */
  readonly key: string;
  /** The source state's name (its key, or its path when outside the part). */
  readonly from: string;
  readonly to: string;
  /** The label, alternatives joined with `; `. */
  readonly label: string;
}

/** Labels longer than this, or of several lines, are drawn as keys: long ones overlap. */
const maxInlineLabel = 9;

/** ①…⑳, then (21), (22), … */
const keyOf = (n: number) => (n < 20 ? String.fromCodePoint(0x2460 + n) : `(${n + 1})`);

const pathOf = (node: StateNodeLike) => node.id.slice(node.machine.id.length + 1);

/** Joins the labels of one edge, shortest first: guarded alternatives and done/error pairs merged. */
function joinLabels(labels: readonly string[]): string {
  const merged: string[] = [];
  const events = new Map<string, string[]>(); // event → guards ('' = unguarded), in order
  for (const label of labels) {
    const match = /^(\S+)(?: \[(.+)\])?$/.exec(label);
    const event = match?.[1] ?? label;
    const guard = match?.[2] ?? '';
    if (!events.has(event)) events.set(event, []);
    events.get(event)!.push(guard);
  }
  const done = 'xstate.done.actor.';
  const error = 'xstate.error.actor.';
  const text = (event: string, guards: readonly string[]) =>
    guards.length === 1 && guards[0] === ''
      ? event
      : `${event} [${guards.map((g) => (g === '' ? 'else' : g)).join(' | ')}]`;
  for (const [event, guards] of events) {
    if (event.startsWith(error) && events.has(`${done}${event.slice(error.length)}`)) {
      const twin = events.get(`${done}${event.slice(error.length)}`)!;
      if (twin.join('\u0000') === guards.join('\u0000')) continue; // written with its done twin
    }
    if (event.startsWith(done)) {
      const actor = event.slice(done.length);
      const twin = events.get(`${error}${actor}`);
      if (twin !== undefined && twin.join('\u0000') === guards.join('\u0000')) {
        merged.push(text(`${actor} done/error`, guards));
        continue;
      }
    }
    merged.push(text(event, guards));
  }
  return merged.join('<br/>');
}

/**
 * Draws a machine as flat diagrams: its top level, then each compound or parallel state, depth
 * first in definition order.
 *
 * @param machine - any XState v5 machine
 * @returns the parts, the top level first
 * @throws never for a valid machine
 * @example
 * ```ts
 * for (const part of toMermaidStateDiagramParts(sessionMachine)) console.log(part.path, part.text);
 * ```
 */
export function toMermaidStateDiagramParts(machine: AnyStateMachine): MermaidDiagramPart[] {
  const root = toDirectedGraph(machine);
  const transitions = listTransitions(root);
  const parents = new Map<string, string | undefined>(); // state id → parent state id
  const index = (graph: DirectedGraphNode, parent: string | undefined) => {
    for (const child of graph.children) {
      parents.set(child.stateNode.id, parent);
      index(child, child.stateNode.id);
    }
  };
  index(root, undefined);

  const parts: MermaidDiagramPart[] = [];
  const draw = (graph: DirectedGraphNode) => {
    const scope = graph.stateNode as unknown as StateNodeLike;
    const isRoot = graph === root;
    const children = graph.children.map((c) => c.stateNode as unknown as StateNodeLike);
    const childIds = new Set(children.map((c) => c.id));
    /** The child of this scope that is `node` or holds it; undefined when `node` is outside. */
    const childOf = (node: StateNodeLike): string | undefined => {
      for (let id: string | undefined = node.id; id !== undefined; id = parents.get(id)) {
        if (childIds.has(id)) return id;
      }
      return undefined;
    };
    const byId = new Map(children.map((c) => [c.id, c]));
    const edges = new Map<string, { from: string; to: string; labels: string[] }>();
    const outside = new Map<string, StateNodeLike>();
    const add = (from: string, to: string, label: string) => {
      const key = `${from}\u0000${to}`;
      const edge = edges.get(key) ?? { from, to, labels: [] };
      edges.set(key, edge);
      edge.labels.push(label);
    };
    for (const { source, target, label } of transitions) {
      const a = childOf(source);
      const b = childOf(target);
      if (a !== undefined && b !== undefined) {
        // Within one child, it belongs to that child's own part (unless it is about the child).
        if (a !== b || source.id === a || target.id === a) {
          add(idOf(byId.get(a)!), idOf(byId.get(b)!), label);
        }
      } else if (a !== undefined && !isRoot) {
        outside.set(target.id, target);
        add(idOf(byId.get(a)!), `to_${idOf(target)}`, label);
      }
    }

    const lines = ['stateDiagram-v2'];
    for (const child of children) {
      const nested = child.type === 'compound' || child.type === 'parallel';
      const name = nested ? `${child.key} ▸` : child.key;
      if (nested || idOf(child) !== child.key) lines.push(`  state "${name}" as ${idOf(child)}`);
    }
    for (const node of outside.values())
      lines.push(`  state "→ ${pathOf(node)}" as to_${idOf(node)}`);
    const initial = scope.initial?.target?.[0];
    if (initial !== undefined && scope.type !== 'parallel') {
      const first = childOf(initial);
      if (first !== undefined) lines.push(`  [*] --> ${idOf(byId.get(first)!)}`);
    }
    for (const child of children) {
      if (child.type === 'final') lines.push(`  ${idOf(child)} --> [*]`);
    }
    const names = new Map<string, string>([
      ...children.map((c) => [idOf(c), c.key] as const),
      ...[...outside.values()].map((n) => [`to_${idOf(n)}`, pathOf(n)] as const),
    ]);
    const legend: MermaidLegendEntry[] = [];
    for (const edge of edges.values()) {
      let label = joinLabels(edge.labels);
      if (label.includes('<br/>') || label.length > maxInlineLabel) {
        const key = keyOf(legend.length);
        legend.push({
          key,
          from: names.get(edge.from) ?? edge.from,
          to: names.get(edge.to) ?? edge.to,
          label: label.replace(/<br\/>/g, '; '),
        });
        label = key;
      }
      lines.push(`  ${edge.from} --> ${edge.to} : ${label}`);
    }
    const nestedIds = children
      .filter((c) => c.type === 'compound' || c.type === 'parallel')
      .map((c) => idOf(c));
    if (nestedIds.length > 0) {
      lines.push('  classDef nested font-weight:bold');
      lines.push(`  class ${nestedIds.join(',')} nested`);
    }
    if (outside.size > 0) {
      lines.push('  classDef outside fill:none,stroke-dasharray:4 3');
      lines.push(`  class ${[...outside.values()].map((n) => `to_${idOf(n)}`).join(',')} outside`);
    }
    parts.push({ path: isRoot ? '' : pathOf(scope), text: `${lines.join('\n')}\n`, legend });
    for (const child of graph.children) if (child.children.length > 0) draw(child);
  };
  draw(root);
  return parts;
}
