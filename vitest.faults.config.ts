import { defineConfig } from 'vitest/config';

/**
 * The fault tests (`npm run test:faults`, and after the main suite in `npm test`): worker roles
 * killed with kill -9 mid-work, a private Redis and a private Postgres restarted under a burst,
 * the SMTP and Twilio stand-ins stopped. They start real processes and servers, so they get
 * long timeouts and run apart from the main suite.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    environment: 'node',
    pool: 'forks',
    fileParallelism: true,
    testTimeout: 240_000,
    hookTimeout: 180_000,
    env: { NODE_ENV: 'test', LOG_LEVEL: 'silent' },
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
