/**
 * An AbortController whose signal is created on first use.
 *
 * @module
 */

/**
 * Like `AbortController`, but the `AbortSignal` (an `EventTarget`, among the costlier objects a
 * run allocates) is built only when someone reads `signal`. An `abort(reason)` before that is
 * remembered, and the signal is created already aborted with that reason.
 *
 * @remarks The first abort wins, as with `AbortController`.
 * @example
 * ```ts
 * const controller = new LazyAbortController();
 * controller.abort(new Error('stop')); // nothing was allocated for the signal yet
 * controller.signal.aborted; // true, reason: Error('stop')
 * ```
 */
export class LazyAbortController {
  #controller: AbortController | undefined;
  #aborted = false;
  #reason: unknown;

  /** The signal, created on first read. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** Whether `abort()` was called. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** Aborts with `reason` (the first call wins); listeners run at once if the signal exists. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
