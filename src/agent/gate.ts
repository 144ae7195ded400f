/**
 * Gates: a promise you open by hand, for deterministic race tests.
 *
 * @module
 */

/**
 * A one-shot gate: waiters block until {@link Gate.open} is called.
 *
 * @remarks `reached` tells a test that something is now blocked on the gate, so it can act
 * (cancel, interrupt, push a hint) at exactly that point, without sleeping.
 */
export interface Gate {
  /** Resolves when the first waiter arrives. */
  readonly reached: Promise<void>;
  /** Whether {@link Gate.open} was called. */
  readonly isOpen: boolean;
  /** Releases every waiter, now and later. */
  open(): void;
  /**
   * Waits until the gate opens.
   *
   * @param signal - aborting it rejects with its reason
   */
  wait(signal?: AbortSignal): Promise<void>;
}

/**
 * Creates a closed {@link Gate}.
 *
 * @example
 * ```ts
 * const gate = createGate();
 * const model = createScriptedModel([{ text: ['a', 'b'], gate }]);
 * // ... start a run, then:
 * await gate.reached; run.interrupt(); gate.open();
 * ```
 */
export function createGate(): Gate {
  let opened = false;
  let release!: () => void;
  let markReached!: () => void;
  const openPromise = new Promise<void>((resolve) => (release = resolve));
  const reached = new Promise<void>((resolve) => (markReached = resolve));
  return {
    reached,
    get isOpen() {
      return opened;
    },
    open() {
      opened = true;
      release();
    },
    wait(signal) {
      markReached();
      if (opened) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        if (signal?.aborted) {
          reject(signal.reason as Error);
          return;
        }
        const onAbort = () => reject(signal?.reason as Error);
        signal?.addEventListener('abort', onAbort, { once: true });
        void openPromise.then(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        });
      });
    },
  };
}
