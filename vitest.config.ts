import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    // The README examples import 'runplane' and 'runplane/testing' as a user would; tests
    // resolve them to the sources.
    alias: [
      { find: /^runplane$/, replacement: source('./src/index.ts') },
      { find: /^runplane\/testing$/, replacement: source('./src/testing/index.ts') },
      { find: /^runplane\/stores\/sqlite$/, replacement: source('./src/stores/sqlite/index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // Generous: tests that start `runplane` processes compile the sources with tsx, which takes
    // seconds per process on a loaded 2-core host. A stuck test still fails within a minute.
    testTimeout: 60_000,
  },
});
