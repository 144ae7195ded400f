/**
 * What the record-store contract suites share: a store seen through `await` (so one suite runs
 * against the synchronous memory and SQLite stores and against the cluster's, whose reads are
 * asynchronous), and the harness each backend provides.
 */

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
