import { type RunningWeb, startWeb } from '../api/server.ts';
import { configuredCheck, mailServerVerdict } from '../shared/domain/email-acceptance.ts';
import { configOrExit, handleShutdown } from '../shared/lifecycle.ts';
import { waitForRedis } from '../shared/queues/connection.ts';
import { WORKER_ROLES } from '../shared/queues/registry.ts';
import { createRuntime } from '../shared/runtime.ts';
import { seedDemo } from '../shared/services/seed.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';

/**
 * `npm start`: the whole system in one process for a single machine: migrations, demo seed
 * (SEED_DEMO defaults to 1 here), the API and every worker role. In production run the Procfile's process
 * types instead, one role per process.
 */
// `npm start` is the newcomer's whole system: demo data unless SEED_DEMO says otherwise
// (`SEED_DEMO=0 npm start` starts empty). The Procfile's process types default to no seed.
process.env.SEED_DEMO ??= '1';
const config = await configOrExit();
const rt = createRuntime(config, 'all');
// Signals are handled from here on, before anything starts: a SIGTERM that arrives while the
// roles start (say, just after the first logs "worker started") stops what has started so far.
let workers: RunningRoles | null = null;
let web: RunningWeb | null = null;
let simulator: RunningRoles | null = null;
handleShutdown(rt.logger, config.shutdownTimeoutMs, async () => {
  await simulator?.close();
  await web?.close();
  await workers?.close();
  await rt.close();
});
if (config.databaseSchema !== 'public') await rt.db.raw('create schema if not exists ??', [config.databaseSchema]);
const [, applied] = (await rt.db.migrate.latest()) as [number, string[]];
if (applied.length > 0) rt.logger.info({ applied }, 'migrations applied');
const tariffsAdded = await syncBuiltInTariffs(rt.db);
if (tariffsAdded > 0) rt.logger.info({ tariffsAdded }, 'built-in council tariffs loaded');
await waitForRedis(rt.redis);
const seeded = config.seedDemo ? await seedDemo(rt.db, config, rt.logger) : null;
// The simulator (simulated drivers serving test-mode bookings) talks to the API over HTTP, so it
// starts once the API listens; it runs with the demo data only (SEED_DEMO=0 starts empty).
const roles = WORKER_ROLES.filter((r) => r !== 'simulator');
workers = startRoles(roles, rt);
const started = await startWeb(rt);
web = started;
simulator = config.seedDemo ? startRoles(['simulator'], rt) : null;

const base = config.publicBaseUrls[0] ?? `http://localhost:${started.port}`;
const lines = [
  '',
  `${config.serviceName} is running: API on port ${started.port}, worker roles ${[...roles, ...(simulator ? ['simulator'] : [])].join(', ')}.`,
  `  readiness:   curl ${base}/readyz`,
  `  OpenAPI:     curl ${base}/api/public/v1/openapi.json`,
  `  a quote:     curl -X POST ${base}/api/public/v1/quote -H 'Content-Type: application/json' -d '{"pickup":"Manchester Piccadilly","dropoff":"Manchester Airport","passengers":2}'`,
  `  your key:    curl -H "${config.apiKeyHeader}: <key>" ${base}/api/public/v1/whoami`,
  `  sandbox:     send a test key (dtn_test_…) with the quote; its bookingUrl is the booking page (${base}/book/<quoteId>),`,
  `               booking there leads to the tracking page (${base}/track/<token>), where simulated drivers take the ride to completed`,
  `  test SMS/e-mail: curl -H "${config.apiKeyHeader}: <test key>" ${base}/api/public/v1/test/messages`,
  `  operators:   ${base}/operator (an account: npm run admin -- operator create --email E)`,
  `  MCP:         ${base}/mcp (OAuth 2.1; metadata at ${base}/.well-known/oauth-protected-resource/mcp)`,
  simulator
    ? `  simulator:   ${config.simulator.fleetSize} simulated drivers around ${config.simulator.cities.join(', ')} (test-mode bookings only)`
    : '  simulator:   off (SEED_DEMO=0); run it with: npm run worker -- simulator',
];
if (seeded && Object.keys(seeded.created).length > 0) {
  lines.push('  demo data created (secrets are shown this once):');
  for (const [k, v] of Object.entries(seeded.created)) lines.push(`    ${k}: ${v}`);
} else if (seeded) {
  lines.push('  demo data already present; make a new key with: npm run admin -- key create --name me');
}
const mailCheck = await mailCheckWarning();
if (mailCheck) lines.push(...mailCheck);
process.stdout.write(`${lines.join('\n')}\n\n`);

const demoKey = seeded?.created.demoApiKey;
if (demoKey) void demoQuote(demoKey);

async function demoQuote(demoKey: string): Promise<void> {
  // A real sandbox quote with the new demo key, so its booking page can be opened at once.
  try {
    const res = await fetch(`http://127.0.0.1:${started.port}/api/public/v1/quote`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [config.apiKeyHeader]: demoKey },
      body: JSON.stringify({ pickup: 'Manchester Piccadilly', dropoff: 'Manchester Airport', passengers: 2 }),
      signal: AbortSignal.timeout(10_000),
    });
    const quote = (await res.json()) as { bookingUrl?: string; fareGBP?: number };
    if (quote.bookingUrl) {
      process.stdout.write(
        `  booking page of a sandbox quote (£${quote.fareGBP?.toFixed(2)}): ${quote.bookingUrl}\n  book there and follow the tracking page: a simulated driver takes the ride to completed\n\n`,
      );
    }
  } catch (err) {
    rt.logger.warn({ err }, 'could not make the demo sandbox quote');
  }
}

/**
 * On a machine whose DNS cannot confirm that a common mail domain receives mail (offline, or a
 * resolver that answers "no such domain" to everything), the mail-server check would refuse
 * every live passenger's address: the banner says so, and what to do, rather than leave the
 * newcomer with 400 email_not_accepted on their first booking. Test-mode requests skip the
 * lookup and are unaffected.
 */
async function mailCheckWarning(): Promise<string[] | null> {
  const { mx, ...dns } = configuredCheck(config.bookings);
  if (mx === 'off') return null;
  const probe = 'gmail.com';
  const verdict = await mailServerVerdict(probe, dns);
  if (verdict === 'yes' || (mx === 'soft' && verdict === 'unknown')) return null;
  return [
    `  e-mail check: this machine's DNS ${verdict === 'no' ? `says ${probe} has no mail server` : `did not answer for ${probe}`}, so with`,
    `               EMAIL_MX_CHECK=${mx} live bookings will refuse every passenger address (400 email_not_accepted);`,
    '               use a test key (no mail-server lookup), or start with EMAIL_MX_CHECK=off',
  ];
}
