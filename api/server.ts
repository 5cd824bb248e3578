import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { knownMigrations } from '../shared/db/knex.ts';
import { configOrExit, handleShutdown, isMain } from '../shared/lifecycle.ts';
import { createRuntime, type Runtime } from '../shared/runtime.ts';
import { buildApp } from './app.ts';
import { answerClientErrors } from './client-errors.ts';

export interface RunningWeb {
  port: number;
  /** Stop accepting connections, finish requests in flight. */
  close(): Promise<void>;
}

/** Serve the API on the runtime's connections (`PORT`, `HOST`). */
export async function startWeb(rt: Runtime): Promise<RunningWeb> {
  const app = buildApp({ ...rt, expectedMigrations: await knownMigrations() });
  const server = app.listen(rt.config.port, rt.config.host);
  answerClientErrors(server);
  await once(server, 'listening');
  // Behind a load balancer, idle keep-alive sockets must outlive the balancer's own timeout.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 30_000;
  const port = (server.address() as AddressInfo).port;
  rt.logger.info({ port, baseUrls: rt.config.publicBaseUrls }, 'API listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeIdleConnections();
      }),
  };
}

async function main(): Promise<void> {
  const config = await configOrExit();
  const rt = createRuntime(config, 'web');
  // Signals are handled before the server starts (see workers/main.ts).
  let web: RunningWeb | null = null;
  handleShutdown(rt.logger, config.shutdownTimeoutMs, async () => {
    await web?.close();
    await rt.close();
  });
  web = await startWeb(rt);
}

if (isMain(import.meta.url)) await main();
