/**
 * The peers runplane is measured against, each behind the same small surface: a no-op run, and a
 * run that blocks until cancelled by the peer's own cancel. Used only by bench/.
 *
 * - floor: a plain Promise and an AbortController.
 * - bare XState: the run machine of core.bench.ts (an invoked promise actor); cancel is its
 *   `cancel` event, which stops the invoked actor and aborts its signal.
 * - runplane: runtime.prepare → start → termination; cancel is run.cancel().
 * - LangGraph: a one-node StateGraph, without and with a MemorySaver; cancel is an AbortSignal
 *   passed to invoke.
 * - OpenAI Agents: a Runner whose ModelProvider returns a fixed answer without network; cancel is
 *   an AbortSignal passed to run.
 */
import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import {
  Agent as OpenAIAgent,
  Runner,
  Usage,
  type Model,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from '@openai/agents';
import { createActor, fromPromise } from 'xstate';
import { createMemoryEventLog, createRuntime, type Agent, type Runtime } from '../src/index.js';
import { bareLifecycle, bareRunMachine, noop } from './core.bench.js';

/** A peer: how to do one no-op run, and how to start a blocked run and cancel it. */
export interface Peer {
  /** One run of a no-op agent, settled. `key` groups runs into a session or thread. */
  run(i: number, key: string): Promise<unknown>;
  /** Starts a run that blocks until cancelled; resolves once it is running, with its cancel. */
  startBlocked(i: number): Promise<{ cancel(): Promise<void> }>;
  close(): Promise<void>;
}

function abortable(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason as Error);
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

const settle = (p: Promise<unknown>): Promise<void> =>
  p.then(
    () => undefined,
    () => undefined,
  );

export function createFloorPeer(): Peer {
  return {
    run: (i) => noop.execute(i, { signal: new AbortController().signal } as never),
    startBlocked() {
      const controller = new AbortController();
      const running = settle(abortable(controller.signal));
      return Promise.resolve({
        cancel: () => {
          controller.abort();
          return running;
        },
      });
    },
    close: () => Promise.resolve(),
  };
}

export function createBareXStatePeer(): Peer {
  let started: () => void = () => undefined;
  const blockedMachine = bareRunMachine.provide({
    actors: {
      agent: fromPromise(({ signal }) => {
        started();
        return abortable(signal);
      }),
    },
  });
  return {
    run: (i) => bareLifecycle(i),
    async startBlocked(i) {
      const actor = createActor(blockedMachine, { input: i });
      const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
      const running = new Promise<void>((resolve) => (started = resolve));
      actor.start();
      actor.send({ type: 'start' });
      await running;
      return {
        cancel: () => {
          actor.send({ type: 'cancel' });
          return done;
        },
      };
    },
    close: () => Promise.resolve(),
  };
}

export function createRunplanePeer(): Peer & { runtime: Runtime } {
  // A capped log: the store's own retention is not what this measures.
  const runtime = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1_000 }) },
  });
  let started: () => void = () => undefined;
  const blocked: Agent<number, number> = {
    execute: (_i, ctx) => {
      started();
      return abortable(ctx.signal);
    },
  };
  return {
    runtime,
    run(i, key) {
      const run = runtime.prepare({ ownerId: 'bench', sessionId: key, agent: noop, input: i });
      run.start();
      return run.termination;
    },
    async startBlocked(i) {
      const running = new Promise<void>((resolve) => (started = resolve));
      const run = runtime.prepare({
        ownerId: 'bench',
        sessionId: 'cancel',
        agent: blocked,
        input: i,
      });
      run.start();
      await running;
      return {
        cancel: () => {
          run.cancel();
          return settle(run.termination);
        },
      };
    },
    close: async () => {
      await runtime.shutdown({ graceMs: 0 });
    },
  };
}

const GraphState = Annotation.Root({ n: Annotation<number> });

export function createLangGraphPeer(withMemorySaver: boolean): Peer {
  const checkpointer = withMemorySaver ? new MemorySaver() : undefined;
  const graph = new StateGraph(GraphState)
    .addNode('agent', (state: typeof GraphState.State) => ({ n: state.n + 1 }))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
  let started: () => void = () => undefined;
  const blockedGraph = new StateGraph(GraphState)
    .addNode('agent', async (_state: typeof GraphState.State, config) => {
      started();
      await abortable(config.signal ?? new AbortController().signal);
      return {};
    })
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
  return {
    // A thread per session key, as an application would use one per conversation.
    run: (i, key) => graph.invoke({ n: i }, { configurable: { thread_id: key } }),
    async startBlocked(i) {
      const controller = new AbortController();
      const running = new Promise<void>((resolve) => (started = resolve));
      const invoked = settle(
        blockedGraph.invoke(
          { n: i },
          { signal: controller.signal, configurable: { thread_id: `cancel-${i}` } },
        ),
      );
      await running;
      return {
        cancel: () => {
          controller.abort();
          return invoked;
        },
      };
    },
    close: () => Promise.resolve(),
  };
}

/** A Model that answers every request with the same assistant message, without network. */
class FixedModel implements Model {
  started: () => void = () => undefined;
  constructor(private readonly blocking: boolean) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    if (this.blocking) {
      this.started();
      await abortable(request.signal ?? new AbortController().signal);
    }
    return {
      usage: new Usage(),
      output: [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'ok' }],
        },
      ],
    };
  }
  getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used by the bench: it never streams');
  }
}

export function createOpenAIAgentsPeer(): Peer {
  const fixed = new FixedModel(false);
  const blocking = new FixedModel(true);
  const provider = (model: Model): ModelProvider => ({ getModel: () => model });
  const runner = new Runner({ modelProvider: provider(fixed), tracingDisabled: true });
  const blockedRunner = new Runner({ modelProvider: provider(blocking), tracingDisabled: true });
  const agent = new OpenAIAgent({ name: 'noop', instructions: 'answer ok' });
  return {
    run: (i) => runner.run(agent, `input ${i}`),
    async startBlocked(i) {
      const controller = new AbortController();
      const running = new Promise<void>((resolve) => (blocking.started = resolve));
      const ran = settle(blockedRunner.run(agent, `input ${i}`, { signal: controller.signal }));
      await running;
      return {
        cancel: () => {
          controller.abort();
          return ran;
        },
      };
    },
    close: () => Promise.resolve(),
  };
}

/** Every peer, in the order the tables print them. */
export function createPeers(): Record<string, Peer> {
  return {
    runplane: createRunplanePeer(),
    'bare XState': createBareXStatePeer(),
    'Promise + AbortController': createFloorPeer(),
    LangGraph: createLangGraphPeer(false),
    'LangGraph + MemorySaver': createLangGraphPeer(true),
    'OpenAI Agents Runner': createOpenAIAgentsPeer(),
  };
}
