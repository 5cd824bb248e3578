import { startWeb } from '../api/server.ts';
import { configOrExit, handleShutdown } from '../shared/lifecycle.ts';
import { WORKER_ROLES } from '../shared/queues/registry.ts';
import { waitForRedis } from '../shared/queues/connection.ts';
import { createRuntime } from '../shared/runtime.ts';
import { seedDemo } from '../shared/services/seed.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { startRoles } from '../workers/runner.ts';

/**
 * `npm start`: the whole system in one process for a single machine: migrations, demo seed
 * (SEED_DEMO=1), the API and every worker role. In production run the Procfile's process
 * types instead, one role per process.
 */
const config = await configOrExit();
const rt = createRuntime(config, 'all');
if (config.databaseSchema !== 'public') await rt.db.raw('create schema if not exists ??', [config.databaseSchema]);
const [, applied] = (await rt.db.migrate.latest()) as [number, string[]];
if (applied.length > 0) rt.logger.info({ applied }, 'migrations applied');
const tariffsAdded = await syncBuiltInTariffs(rt.db);
if (tariffsAdded > 0) rt.logger.info({ tariffsAdded }, 'built-in council tariffs loaded');
await waitForRedis(rt.redis);
const seeded = config.seedDemo ? await seedDemo(rt.db, config, rt.logger) : null;
const workers = startRoles([...WORKER_ROLES], rt);
const web = await startWeb(rt);

const base = config.publicBaseUrls[0] ?? `http://localhost:${web.port}`;
const lines = [
  '',
  `${config.serviceName} is running: API on port ${web.port}, worker roles ${WORKER_ROLES.join(', ')}.`,
  `  readiness:   curl ${base}/readyz`,
  `  OpenAPI:     curl ${base}/api/public/v1/openapi.json`,
  `  a quote:     curl -X POST ${base}/api/public/v1/quote -H 'Content-Type: application/json' -d '{"pickup":"Manchester Piccadilly","dropoff":"Manchester Airport","passengers":2}'`,
  `  your key:    curl -H "${config.apiKeyHeader}: <key>" ${base}/api/public/v1/whoami`,
];
if (seeded && Object.keys(seeded.created).length > 0) {
  lines.push('  demo data created (secrets are shown this once):');
  for (const [k, v] of Object.entries(seeded.created)) lines.push(`    ${k}: ${v}`);
} else if (seeded) {
  lines.push('  demo data already present; make a new key with: npm run admin -- key create --name me');
}
process.stdout.write(`${lines.join('\n')}\n\n`);

handleShutdown(rt.logger, config.shutdownTimeoutMs, async () => {
  await web.close();
  await workers.close();
  await rt.close();
});
