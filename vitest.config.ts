import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    // Unhandled rejections fail the run: an actor error must never escape as one.
    dangerouslyIgnoreUnhandledErrors: false,
  },
});
