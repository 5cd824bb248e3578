import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault tests run on their own (vitest.faults.config.ts), after this suite in `npm test`.
    exclude: [...configDefaults.exclude, 'test/faults/**'],
    environment: 'node',
    pool: 'forks',
    // Each file has its own Postgres schema and Redis prefix, so files run in parallel.
    fileParallelism: true,
    // Generous: CI shares two cores between the suite's files, Postgres, Redis and Chromium.
    testTimeout: 90_000,
    hookTimeout: 60_000,
    env: { NODE_ENV: 'test', LOG_LEVEL: 'silent' },
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
