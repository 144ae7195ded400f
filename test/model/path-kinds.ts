/**
 * Which kinds of model path the path suites replay. `npm test` replays every kind a suite asks
 * for; `MODEL_PATHS` (comma-separated kinds, e.g. `shortest,ignored`, which `npm run mutate`
 * sets) keeps only those, so that a mutant reruns hundreds of paths instead of thousands
 * (docs/mutation.md).
 */
import type { PathKind } from '../../src/testing/index.js';

const allKinds: readonly PathKind[] = ['shortest', 'simple', 'ignored'];

/**
 * The kinds `MODEL_PATHS` allows, out of `wanted` (all of them when it is unset or empty).
 *
 * @throws Error when `MODEL_PATHS` names a kind that does not exist (a typo would silently drop
 *   every path).
 */
export function pathKinds(wanted: readonly PathKind[] = allKinds): PathKind[] {
  const setting = process.env.MODEL_PATHS?.trim() ?? '';
  if (setting === '') return [...wanted];
  const allowed = setting.split(',').map((kind) => kind.trim());
  const unknown = allowed.filter((kind) => !allKinds.includes(kind as PathKind));
  if (unknown.length > 0) {
    throw new Error(
      `expected MODEL_PATHS to be kinds among ${allKinds.join(', ')}, got ${unknown.join(', ')}`,
    );
  }
  return wanted.filter((kind) => allowed.includes(kind));
}
