/**
 * The chunked checkpoint image (issue 15 item 5): a chain of immer patches, replayed on the image
 * rebuilt from the base, gives back exactly the last saved checkpoint; a push costs one small
 * patch, a turn taking the front costs whole-chunk removals, never a patch per item.
 */
import fc from 'fast-check';
import type { Patch } from 'immer';
import { describe, expect, it } from 'vitest';
import type { Checkpoint } from '../../src/index.js';
import {
  applyImagePatches,
  chunkSize,
  fromImage,
  nextImage,
  toImage,
} from '../../src/turn-loop/checkpoint-image.js';

const checkpoint = (unhandled: readonly unknown[], savedAt = 0): Checkpoint => ({
  format: 'runplane.checkpoint',
  version: 1,
  kind: 'between-turns',
  loop: { status: 'active', value: {}, context: { turnSeq: savedAt } },
  unhandled,
  interrupted: [],
  savedAt,
});

const step = fc.oneof(
  fc.record({ op: fc.constant('push' as const), count: fc.integer({ min: 0, max: 700 }) }),
  fc.record({ op: fc.constant('take' as const), count: fc.integer({ min: 0, max: 1200 }) }),
  fc.record({ op: fc.constant('putBack' as const), count: fc.integer({ min: 1, max: 600 }) }),
  fc.record({ op: fc.constant('replaceAll' as const), count: fc.integer({ min: 0, max: 5 }) }),
);

describe('checkpoint image', () => {
  it('base + every patch replays to the last checkpoint, through JSON', () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 12 }),
        fc.integer({ min: 0, max: 1500 }),
        (steps, size) => {
          let seq = 0;
          const make = (n: number) => Array.from({ length: n }, () => ({ id: seq++ }));
          let items: unknown[] = make(size);
          const base = checkpoint(items);
          let image = toImage(base);
          let replayed = toImage(JSON.parse(JSON.stringify(base)) as Checkpoint);
          for (const [i, s] of steps.entries()) {
            if (s.op === 'push') items = [...items, ...make(s.count)];
            else if (s.op === 'take') items = items.slice(s.count);
            else if (s.op === 'putBack') items = [...make(s.count), ...items];
            else items = make(s.count);
            const saved = checkpoint(items, i + 1);
            const next = nextImage(image, saved);
            if (next === undefined) {
              // A whole save: the chain starts again from it.
              image = toImage(saved);
              replayed = toImage(JSON.parse(JSON.stringify(saved)) as Checkpoint);
              continue;
            }
            expect(fromImage(next.image)).toEqual(saved);
            image = next.image;
            replayed = applyImagePatches(
              replayed,
              JSON.parse(JSON.stringify(next.patches)) as Patch[],
            );
            expect(fromImage(replayed)).toEqual(JSON.parse(JSON.stringify(saved)));
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('one push into 100,000 items is one small patch; taking the front removes whole chunks', () => {
    const items = Array.from({ length: 100_000 }, (_, i) => ({ i }));
    const image = toImage(checkpoint(items));
    const pushed = nextImage(image, checkpoint([...items, { i: -1 }], 1));
    expect(pushed).toBeDefined();
    const paths = pushed!.patches.map((p) => p.path.join('/'));
    expect(paths).toEqual(
      expect.arrayContaining([
        `unhandled/chunks/${Math.floor(100_000 / chunkSize)}/${100_000 % chunkSize}`,
      ]),
    );
    expect(JSON.stringify(pushed!.patches).length).toBeLessThan(500);
    // Structural sharing: untouched chunks are the same objects.
    expect(pushed!.image.unhandled.chunks[0]).toBe(image.unhandled.chunks[0]);

    const taken = nextImage(image, checkpoint(items.slice(chunkSize * 2 + 1), 2));
    expect(taken!.patches.filter((p) => p.op === 'remove')).toHaveLength(2);
    // two removals, the rewritten first chunk, `first`, and the envelope's `loop` and `savedAt`
    expect(taken!.patches.length).toBeLessThanOrEqual(6);
  });

  it('a save never changes the image before it (the stored chain stays what it was)', () => {
    const items = Array.from({ length: 1_500 }, (_, i) => ({ i }));
    const image = toImage(checkpoint(items));
    const before = JSON.stringify(image);
    const next = nextImage(image, checkpoint([...items.slice(600), { i: -1 }], 1));
    expect(next).toBeDefined();
    expect(JSON.stringify(image)).toBe(before);
  });
});
