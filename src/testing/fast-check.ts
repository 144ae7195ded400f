/**
 * fast-check, the optional peer of `runplane/testing`, loaded on first use: importing the entry
 * point never needs it; only the race properties do.
 *
 * @module
 */
import type FastCheckModule from 'fast-check';

/** @internal The fast-check namespace (`fc`). */
export type FastCheck = typeof FastCheckModule;

let loading: Promise<FastCheck> | undefined;

/**
 * @internal Loads fast-check once.
 *
 * @throws Error (as a rejection) naming the missing peer and how to install it, with the
 *   module-resolution error as `cause`, when fast-check is not installed
 */
export function loadFastCheck(): Promise<FastCheck> {
  loading ??= import('fast-check').then(
    (module) => module.default,
    (error: unknown) => {
      loading = undefined;
      throw new Error(
        'the race properties of runplane/testing need the optional peer dependency fast-check ' +
          '(npm install --save-dev fast-check@^4)',
        { cause: error },
      );
    },
  );
  return loading;
}
