/**
 * What `runplane serve` registers for trace context (README "Observability"): the W3C
 * trace-context propagator of `@opentelemetry/core` (so an incoming `traceparent` is read) and a
 * context manager on Node's AsyncLocalStorage (so the request's context reaches the run it
 * starts across awaits). An application that registered its own (an SDK's `register()` in a
 * `--import` preload, say) keeps them: the API refuses a second registration.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/** A context manager on AsyncLocalStorage (what `@opentelemetry/context-async-hooks` does). */
class AsyncLocalStorageContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(ctx, () => fn.apply(thisArg, args));
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const fn = target as unknown as (...args: unknown[]) => unknown;
    return ((...args: unknown[]) => this.with(ctx, fn, undefined, ...args)) as unknown as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }
}

/**
 * Registers the W3C trace-context propagator and an AsyncLocalStorage context manager,
 * unless the application registered its own.
 *
 * @returns which of the two this call registered
 * @internal
 */
export function registerTraceContext(): { propagator: boolean; contextManager: boolean } {
  return {
    propagator: propagation.setGlobalPropagator(new W3CTraceContextPropagator()),
    contextManager: context.setGlobalContextManager(new AsyncLocalStorageContextManager()),
  };
}
