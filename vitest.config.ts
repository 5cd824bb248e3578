import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    pool: 'forks',
    // Each file has its own Postgres schema and Redis prefix, so files run in parallel.
    fileParallelism: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: { NODE_ENV: 'test', LOG_LEVEL: 'silent' },
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
