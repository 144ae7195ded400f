/**
 * What the record-store contract suites share: a store seen through `await` (so one suite runs
 * against the synchronous memory and SQLite stores and against the cluster's, whose reads are
 * asynchronous), and the harness each backend provides.
 */
import { afterEach } from 'vitest';

/** `T` with every method's result possibly a promise. */
export type Awaitable<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => infer R
    ? (...args: A) => R | Promise<R>
    : T[K];
};

/** One backend under test: the store and how to dispose of it. */
export interface StoreHarness<T> {
  readonly store: Awaitable<T>;
  dispose(): void | Promise<void>;
}

/**
 * Call inside a suite's `describe`: returns `setup`, which opens a harness for the test and
 * answers its store; the harness is disposed of after the test.
 */
export function useStoreHarness<T>(
  open: () => Promise<StoreHarness<T>>,
): () => Promise<Awaitable<T>> {
  let harness: StoreHarness<T> | undefined;
  afterEach(async () => {
    await harness?.dispose();
    harness = undefined;
  });
  return async () => (harness = await open()).store;
}
