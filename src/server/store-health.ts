/**
 * Whether the service's shared store can be reached (README "Cluster"): a cluster's Redis may
 * be down or cut off while the instance runs. Then a request that needs it is answered 503
 * `store_unavailable` with `Retry-After` (not 500 `internal`), `GET /healthz` says so, and the
 * instance recovers by itself once the store answers again.
 *
 * @module
 */

/** The reachability of the service's shared store (`ServiceOptions.storeHealth`). */
export interface StoreHealth {
  /**
   * Whether `error` (or an error in its `cause` chain) means the store cannot be reached now (a
   * refused or lost connection, a command given up after its retries, a store still loading),
   * rather than a bug or a refusal.
   */
  isUnavailable(error: unknown): boolean;
  /**
   * Asks the store now, within a bound of its own.
   *
   * @returns why the store cannot be reached, or `undefined` when it answers
   */
  check(): Promise<string | undefined>;
}

/** `Retry-After` of a 503 `store_unavailable`, in seconds. */
export const storeRetryAfterSeconds = 2;
