import { once } from 'node:events';
import express from 'express';
import { errorHandler } from '../api/middleware/errors.ts';
import { metricsHandler } from '../api/middleware/metrics.ts';
import { configOrExit, handleShutdown, isMain } from '../shared/lifecycle.ts';
import { WORKER_ROLES, type WorkerRole } from '../shared/queues/registry.ts';
import type { Runtime } from '../shared/runtime.ts';
import { createRuntime } from '../shared/runtime.ts';
import { type RunningRoles, startRoles } from './runner.ts';

/** `tsx workers/main.ts <role>[,<role>…]|all`: run worker roles in this process. */
export function parseRoles(arg: string | undefined): WorkerRole[] {
  if (!arg) throw new Error(`name the roles to run: ${WORKER_ROLES.join(', ')} or all`);
  if (arg === 'all') return [...WORKER_ROLES];
  const roles = arg
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const unknown = roles.filter((r) => !(WORKER_ROLES as readonly string[]).includes(r));
  if (unknown.length) throw new Error(`unknown role ${unknown.join(', ')}; roles are ${WORKER_ROLES.join(', ')}`);
  return [...new Set(roles)] as WorkerRole[];
}

async function main(): Promise<void> {
  let roles: WorkerRole[];
  try {
    roles = parseRoles(process.argv[2]);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const config = await configOrExit();
  const rt = createRuntime(config, roles.length === 1 ? (roles[0] as string) : 'workers');
  // Signals are handled before the roles start: a SIGTERM just after "worker started" (a
  // supervisor that saw the log line) must stop them gracefully, not kill the process.
  let running: RunningRoles | null = null;
  let metrics: Awaited<ReturnType<typeof serveMetrics>> | null = null;
  handleShutdown(rt.logger, config.shutdownTimeoutMs, async () => {
    metrics?.close();
    await running?.close();
    await rt.close();
  });
  running = startRoles(roles, rt);
  metrics = config.metrics.workerPort > 0 ? await serveMetrics(rt, config.metrics.workerPort) : null;
}

/**
 * A worker process started alone serves its own `GET /metrics` on METRICS_PORT (job durations
 * and failures happen here, not in the API), with the API's rule: bearer METRICS_TOKEN, else
 * loopback clients only.
 */
async function serveMetrics(rt: Runtime, port: number) {
  const app = express();
  app.get('/metrics', metricsHandler(rt));
  app.use(errorHandler());
  const server = app.listen(port);
  await once(server, 'listening');
  rt.logger.info({ port }, 'worker metrics served');
  return server;
}

if (isMain(import.meta.url)) await main();
