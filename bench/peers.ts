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
 *
 * The blocked run is the same workload for every peer: its agent (the executor, node or model
 * call) is {@link createBlockedAgent}'s `execute`, which awaits a cancellable timer and honours
 * the AbortSignal the peer hands it. Each peer's per-run setup (creating and starting the run, up
 * to the agent awaiting) happens in `startBlocked`, outside the timed part; `cancel()` is the timed
 * part, from the cancel request until the peer reports the end **and** the agent's promise has
 * settled.
 */
import { setTimeout as sleepUntilAborted } from 'node:timers/promises';
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
  /**
   * Starts a run whose agent blocks until cancelled; resolves once the agent awaits, with the
   * run's cancel. `cancel()` sends the peer's own cancel request and resolves once the peer
   * reports the run over and the agent's promise has settled (returned or thrown).
   */
  startBlocked(i: number): Promise<{ cancel(): Promise<void> }>;
  close(): Promise<void>;
}

/** One blocked run as the agent sees it: it is awaiting, and its promise has settled. */
export interface BlockedRun {
  /** Resolves once the agent awaits its cancellable timer. */
  readonly running: Promise<void>;
  /** Resolves once the agent's promise has returned or thrown. */
  readonly settled: Promise<void>;
}

const settle = (p: Promise<unknown>): Promise<void> =>
  p.then(
    () => undefined,
    () => undefined,
  );

/**
 * The agent of every peer's blocked run: `execute(signal, value)` awaits a 60 s timer that the
 * signal cancels (node:timers/promises), so it rejects with an AbortError as soon as the peer
 * aborts it. Blocked runs go one at a time: `arm()` before starting one returns its
 * {@link BlockedRun}, which the next `execute` reports to.
 */
export function createBlockedAgent(): {
  arm(): BlockedRun;
  execute<T>(signal: AbortSignal | undefined, value: T): Promise<T>;
} {
  let armed: ((agentPromise: Promise<unknown>) => void) | undefined;
  return {
    arm() {
      // Boxed: resolving with the agent's promise itself would wait for it to settle.
      let enter!: (box: { agentPromise: Promise<unknown> }) => void;
      const entered = new Promise<{ agentPromise: Promise<unknown> }>(
        (resolve) => (enter = resolve),
      );
      armed = (agentPromise) => enter({ agentPromise });
      return {
        running: entered.then(() => undefined),
        settled: entered.then(({ agentPromise }) => settle(agentPromise)),
      };
    },
    execute(signal, value) {
      if (signal === undefined) throw new Error('the peer handed its agent no AbortSignal');
      const agentPromise = sleepUntilAborted(60_000, value, { signal });
      const enter = armed;
      armed = undefined;
      enter?.(agentPromise);
      return agentPromise;
    },
  };
}

/** Cancels a blocked run: `request()` is the peer's cancel, `done` its own end of the run. */
const cancelled =
  (request: () => void, done: Promise<unknown>, run: BlockedRun) => (): Promise<void> => {
    request();
    return Promise.all([settle(done), run.settled]).then(() => undefined);
  };

export function createFloorPeer(): Peer {
  const agent = createBlockedAgent();
  return {
    run: (i) => noop.execute(i, { signal: new AbortController().signal } as never),
    async startBlocked(i) {
      const blocked = agent.arm();
      const controller = new AbortController();
      const done = agent.execute(controller.signal, i);
      await blocked.running;
      return { cancel: cancelled(() => controller.abort(), done, blocked) };
    },
    close: () => Promise.resolve(),
  };
}

export function createBareXStatePeer(): Peer {
  const agent = createBlockedAgent();
  const blockedMachine = bareRunMachine.provide({
    actors: {
      agent: fromPromise(({ input, signal }: { input: number; signal: AbortSignal }) =>
        agent.execute(signal, input),
      ),
    },
  });
  return {
    run: (i) => bareLifecycle(i),
    async startBlocked(i) {
      const blocked = agent.arm();
      const actor = createActor(blockedMachine, { input: i });
      const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
      actor.start();
      actor.send({ type: 'start' });
      await blocked.running;
      return { cancel: cancelled(() => actor.send({ type: 'cancel' }), done, blocked) };
    },
    close: () => Promise.resolve(),
  };
}

export function createRunplanePeer(): Peer & { runtime: Runtime } {
  // A capped log: the store's own retention is not what this measures.
  const runtime = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1_000 }) },
  });
  const agent = createBlockedAgent();
  const blockedAgent: Agent<number, number> = {
    execute: (i, ctx) => agent.execute(ctx.signal, i),
  };
  return {
    runtime,
    run(i, key) {
      const run = runtime.prepare({ ownerId: 'bench', sessionId: key, agent: noop, input: i });
      run.start();
      return run.termination;
    },
    async startBlocked(i) {
      const blocked = agent.arm();
      const run = runtime.prepare({
        ownerId: 'bench',
        sessionId: 'cancel',
        agent: blockedAgent,
        input: i,
      });
      run.start();
      await blocked.running;
      // run.termination resolves only once the agent has settled; awaiting both changes nothing.
      return { cancel: cancelled(() => run.cancel(), run.termination, blocked) };
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
  const agent = createBlockedAgent();
  const blockedGraph = new StateGraph(GraphState)
    .addNode('agent', (_state: typeof GraphState.State, config) => agent.execute(config.signal, {}))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
  return {
    // A thread per session key, as an application would use one per conversation.
    run: (i, key) => graph.invoke({ n: i }, { configurable: { thread_id: key } }),
    async startBlocked(i) {
      const blocked = agent.arm();
      const controller = new AbortController();
      const done = blockedGraph.invoke(
        { n: i },
        { signal: controller.signal, configurable: { thread_id: `cancel-${i}` } },
      );
      await blocked.running;
      return { cancel: cancelled(() => controller.abort(), done, blocked) };
    },
    close: () => Promise.resolve(),
  };
}

const fixedResponse = (): ModelResponse => ({
  usage: new Usage(),
  output: [
    {
      type: 'message',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'ok' }],
    },
  ],
});

/**
 * A Model that answers every request with the same assistant message, without network; with a
 * blocked agent, it first awaits that agent's cancellable timer with the request's signal.
 */
class FixedModel implements Model {
  constructor(private readonly blocked?: ReturnType<typeof createBlockedAgent>) {}
  getResponse(request: ModelRequest): Promise<ModelResponse> {
    if (this.blocked === undefined) return Promise.resolve(fixedResponse());
    return this.blocked.execute(request.signal, fixedResponse());
  }
  getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used by the bench: it never streams');
  }
}

export function createOpenAIAgentsPeer(): Peer {
  const agent = createBlockedAgent();
  const provider = (model: Model): ModelProvider => ({ getModel: () => model });
  const runner = new Runner({ modelProvider: provider(new FixedModel()), tracingDisabled: true });
  const blockedRunner = new Runner({
    modelProvider: provider(new FixedModel(agent)),
    tracingDisabled: true,
  });
  const openAIAgent = new OpenAIAgent({ name: 'noop', instructions: 'answer ok' });
  return {
    run: (i) => runner.run(openAIAgent, `input ${i}`),
    async startBlocked(i) {
      const blocked = agent.arm();
      const controller = new AbortController();
      const done = blockedRunner.run(openAIAgent, `input ${i}`, { signal: controller.signal });
      await blocked.running;
      return { cancel: cancelled(() => controller.abort(), done, blocked) };
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
