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
// Local development (no SMTP_URL, so the mail catcher below; not production) on a machine whose
// DNS cannot confirm that gmail.com receives mail would refuse every live passenger's address and
// the MCP sign-in: there the mail-server check is off unless EMAIL_MX_CHECK says otherwise, and
// the banner says so.
const mxOffForDevelopment =
  process.env.EMAIL_MX_CHECK === undefined &&
  process.env.SMTP_URL === undefined &&
  process.env.NODE_ENV !== 'production' &&
  (await mailServerVerdict('gmail.com', dnsServersOf(process.env.EMAIL_DNS_SERVERS))) !== 'yes';
if (mxOffForDevelopment) process.env.EMAIL_MX_CHECK = 'off';
const config = await configOrExit();
const rt = createRuntime(config, 'all');
// Signals are handled from here on, before anything starts: a SIGTERM that arrives while the
// roles start (say, just after the first logs "worker started") stops what has started so far.
let workers: RunningRoles | null = null;
let web: RunningWeb | null = null;
let simulator: RunningRoles | null = null;
let mailCatcher: { close(): Promise<void> } | null = null;
handleShutdown(rt.logger, config.shutdownTimeoutMs, async () => {
  await simulator?.close();
  await web?.close();
  await workers?.close();
  await mailCatcher?.close();
  await rt.close();
});
// No SMTP_URL: the e-mails go to a mail catcher here (`devMailCatcher`), printed as they come.
// Never in production (NODE_ENV=production): mail must go somewhere real or fail visibly there.
const caught =
  process.env.SMTP_URL === undefined && process.env.NODE_ENV !== 'production' ? await devMailCatcher() : null;
mailCatcher = caught;
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
lines.push(
  caught
    ? `  e-mail:      caught here on ${caught.address} (no SMTP_URL): each message is printed below as it comes, the MCP sign-in code and passenger-verify codes too; set SMTP_URL to send real mail`
    : `  e-mail:      sent to ${config.smtpUrl.replace(/\/\/[^@/]*@/, '//')}`,
);
if (seeded && Object.keys(seeded.created).length > 0) {
  lines.push('  demo data created (secrets are shown this once):');
  for (const [k, v] of Object.entries(seeded.created)) lines.push(`    ${k}: ${v}`);
} else if (seeded) {
  lines.push(
    '  demo data already present (its secrets were shown on the first start); a new sandbox key: npm run admin -- key create --name me --test',
    '               an operator account for the console: npm run admin -- operator create --email you@example.org',
  );
}
const mailCheck = mxOffForDevelopment
  ? [
      "  e-mail check: off: this machine's DNS cannot confirm that gmail.com has a mail server, so the",
      '               passenger e-mail check would refuse every live address; set EMAIL_MX_CHECK=soft|strict to choose',
    ]
  : await mailCheckWarning();
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
 * For `npm start` without SMTP_URL: a mail catcher on the default SMTP address (127.0.0.1:2525),
 * the `smtp-server` package, that prints every message it is given (recipients, subject and
 * text) on standard output, so a newcomer on a machine with no mail server reads the MCP
 * sign-in code, a passenger-verify code or a confirmation. Local development only: the messages'
 * codes and links are printed in clear, which is the point of it. The Procfile's processes never
 * start it, nor does `npm start` with NODE_ENV=production. Nothing (null) when the port is taken (a mail server is there) or the package is not
 * installed (a production install without dev dependencies).
 */
async function devMailCatcher(): Promise<{ address: string; close(): Promise<void> } | null> {
  const url = new URL(config.smtpUrl);
  const host = url.hostname;
  const port = Number(url.port || 25);
  let SMTPServer: typeof import('smtp-server').SMTPServer;
  try {
    ({ SMTPServer } = await import('smtp-server'));
  } catch {
    rt.logger.info('no mail catcher: the smtp-server package is not installed (set SMTP_URL to send mail)');
    return null;
  }
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 1024 * 1024,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (stream.sizeExceeded) {
          callback(Object.assign(new Error('message too large for the mail catcher'), { responseCode: 552 }));
          return;
        }
        const to = session.envelope.rcptTo.map((r) => r.address).join(', ');
        process.stdout.write(
          `\n--- e-mail to ${to} ---\n${readableMail(Buffer.concat(chunks))}\n--- end of e-mail ---\n\n`,
        );
        callback();
      });
    },
  });
  let listenError: NodeJS.ErrnoException | undefined;
  const listening = await new Promise<boolean>((resolve) => {
    // SMTPServer re-emits its socket's errors on itself: unheard there, a taken port would end
    // the process instead of leaving the mail to whatever holds the port.
    server.on('error', (err: NodeJS.ErrnoException) => {
      listenError ??= err;
      resolve(false);
      if (server.server.listening) rt.logger.warn({ err }, 'mail catcher error');
    });
    server.listen(port, host, () => resolve(true));
  });
  if (!listening) {
    rt.logger.info(
      { host, port, code: listenError?.code },
      listenError?.code === 'EADDRINUSE'
        ? 'no mail catcher: the SMTP port is taken (a mail server is there, presumably)'
        : 'no mail catcher: the SMTP port could not be opened',
    );
    return null;
  }
  return {
    address: `${host}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A message as a person reads it: its Subject and its text, quoted-printable undone. */
function readableMail(raw: Buffer): string {
  const text = raw.toString('utf8');
  const split = text.search(/\r?\n\r?\n/);
  const head = split === -1 ? text : text.slice(0, split);
  const body = split === -1 ? '' : text.slice(split).trim();
  const subject = /^Subject: (.*(?:\r?\n[ \t].*)*)/im.exec(head)?.[1]?.replace(/\r?\n[ \t]/g, ' ') ?? '';
  const encoding = /^Content-Transfer-Encoding: *([\w-]+)/im.exec(head)?.[1]?.toLowerCase();
  const decoded =
    encoding === 'quoted-printable'
      ? quotedPrintable(body)
      : encoding === 'base64'
        ? Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
        : body;
  return `Subject: ${decodedWords(subject)}\n\n${decoded}`;
}

function quotedPrintable(s: string): string {
  const bytes: number[] = [];
  const flat = s.replace(/=\r?\n/g, '');
  for (let i = 0; i < flat.length; i++) {
    const hex = flat[i] === '=' ? flat.slice(i + 1, i + 3) : '';
    if (/^[0-9A-F]{2}$/i.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(flat[i] as string, 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** RFC 2047 encoded words ("=?UTF-8?Q?...?=", "=?UTF-8?B?...?=") in a header, decoded. */
function decodedWords(s: string): string {
  return s.replace(/=\?utf-8\?([qb])\?([^?]*)\?=/gi, (_m, enc: string, data: string) =>
    enc.toLowerCase() === 'b' ? Buffer.from(data, 'base64').toString('utf8') : quotedPrintable(data.replace(/_/g, ' ')),
  );
}

/**
 * On a machine whose DNS cannot confirm that a common mail domain receives mail (offline, or a
 * resolver that answers "no such domain" to everything), the mail-server check would refuse
 * every live passenger's address: the banner says so, and what to do, rather than leave the
 * newcomer with 400 email_not_accepted on their first booking. Test-mode requests skip the
 * lookup and are unaffected.
 */
/** EMAIL_DNS_SERVERS as the mail-server check reads it (before the configuration is loaded). */
function dnsServersOf(raw: string | undefined): { dnsServers?: string[] } {
  const servers = (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return servers.length > 0 ? { dnsServers: servers } : {};
}

async function mailCheckWarning(): Promise<string[] | null> {
  const { mx, ...dns } = configuredCheck(config.bookings);
  if (mx === 'off') return null;
  const probe = 'gmail.com';
  const verdict = await mailServerVerdict(probe, dns);
  if (verdict === 'yes' || (mx === 'soft' && verdict === 'unknown')) return null;
  return [
    `  e-mail check: this machine's DNS ${verdict === 'no' ? `says ${probe} has no mail server` : `did not answer for ${probe}`}, so with`,
    `               EMAIL_MX_CHECK=${mx} live bookings and the MCP sign-in will refuse every address (400 email_not_accepted);`,
    '               use a test key (no mail-server lookup), or start with EMAIL_MX_CHECK=off',
  ];
}
