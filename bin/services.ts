import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { testDatabaseUrl, testRedisUrl } from '../test/helpers/urls.ts';

/**
 * Make sure Postgres and Redis answer for `npm start` and `npm test`:
 * 1. use DATABASE_URL / REDIS_URL (tests: TEST_DATABASE_URL / TEST_REDIS_URL) when set, else
 *    the local defaults;
 * 2. if nothing answers on a local address and the server is installed, start it (the
 *    machine's cluster when there is one, else a private instance under .local/);
 * 3. if it is not installed, install it with apt-get when running as root on Debian, else
 *    stop with the exact command to run;
 * 4. create the database when it is missing.
 */
const mode = process.argv[2] ?? 'start';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const localDir = path.join(root, '.local');

const databaseUrl =
  mode === 'test' ? testDatabaseUrl() : (process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/dtn');
const redisUrl = mode === 'test' ? testRedisUrl() : (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0');

const say = (msg: string) => process.stderr.write(`services: ${msg}\n`);
function fail(msg: string): never {
  process.stderr.write(`services: ${msg}\n`);
  process.exit(1);
}

const isLocal = (host: string) => ['127.0.0.1', 'localhost', '::1', '[::1]', ''].includes(host);
const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const isRoot = process.getuid?.() === 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function aptInstall(pkgs: string[]): boolean {
  if (!isRoot || !has('apt-get')) return false;
  say(`installing ${pkgs.join(' ')} with apt-get...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  if (update.status !== 0) return false;
  return spawnSync('apt-get', ['install', '-y', '-qq', ...pkgs], { stdio: 'inherit', env }).status === 0;
}

async function retry<T>(fn: () => Promise<T>, seconds: number): Promise<T> {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > until) throw err;
      await sleep(300);
    }
  }
}

// ---------- Postgres ----------
const dbUrl = new URL(databaseUrl);
const dbName = decodeURIComponent(dbUrl.pathname.replace(/^\//, '')) || 'postgres';
const adminUrl = new URL(databaseUrl);
adminUrl.pathname = '/postgres';

async function pgAnswers(): Promise<boolean> {
  const client = new pg.Client({ connectionString: adminUrl.toString(), connectionTimeoutMillis: 3000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch (err) {
    const code = (err as { code?: string }).code;
    // Reachable but refusing us (auth, missing role) is not something starting a server fixes.
    if (code && /^[0-9A-Z]{5}$/.test(code))
      fail(`Postgres at ${dbUrl.host} refused the connection: ${(err as Error).message}`);
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

function pgBinDir(): string | null {
  const base = '/usr/lib/postgresql';
  if (!fs.existsSync(base)) return null;
  const versions = fs.readdirSync(base).filter((v) => fs.existsSync(path.join(base, v, 'bin', 'initdb')));
  versions.sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(base, versions[0], 'bin') : null;
}

function startMachinePostgres(): boolean {
  if (!has('pg_lsclusters') || !has('pg_ctlcluster')) return false;
  const out = execFileSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' }).trim();
  const line = out.split('\n').find((l) => l.trim());
  if (!line) return false;
  const [version, cluster] = line.trim().split(/\s+/);
  if (!version || !cluster) return false;
  say(`starting the machine's Postgres cluster ${version}/${cluster}...`);
  return (
    spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, cluster, 'start'], { stdio: 'inherit' })
      .status === 0
  );
}

function startPrivatePostgres(binDir: string): boolean {
  const dataDir = path.join(localDir, 'pg', 'data');
  const runDir = path.join(localDir, 'pg', 'run');
  fs.mkdirSync(runDir, { recursive: true });
  // initdb and postgres refuse to run as root: run them as the postgres user when we are root.
  const asUser = (cmd: string, args: string[]) =>
    isRoot
      ? spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'inherit' })
      : spawnSync(cmd, args, { stdio: 'inherit' });
  if (isRoot) spawnSync('chown', ['-R', 'postgres:postgres', path.join(localDir, 'pg')]);
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    say(`initialising a private Postgres in ${dataDir}...`);
    if (
      asUser(path.join(binDir, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']).status !== 0
    )
      return false;
  }
  const port = dbUrl.port || '5432';
  say(`starting a private Postgres on 127.0.0.1:${port}...`);
  return (
    asUser(path.join(binDir, 'pg_ctl'), [
      '-D',
      dataDir,
      '-l',
      path.join(localDir, 'pg', 'postgres.log'),
      '-w',
      '-o',
      `-p ${port} -c listen_addresses=127.0.0.1 -k ${runDir}`,
      'start',
    ]).status === 0
  );
}

async function ensurePostgres(): Promise<void> {
  if (await pgAnswers()) return;
  if (!isLocal(dbUrl.hostname)) fail(`Postgres at ${dbUrl.host} does not answer; check DATABASE_URL.`);
  let bin = pgBinDir();
  if (!bin && !has('pg_ctlcluster')) {
    if (!aptInstall(['postgresql'])) {
      fail(
        'Postgres is not installed. Install it, then run this again:\n  sudo apt-get update && sudo apt-get install -y postgresql',
      );
    }
    bin = pgBinDir();
  }
  const started = startMachinePostgres() || (bin !== null && startPrivatePostgres(bin));
  if (!started) fail('could not start Postgres; start it yourself or set DATABASE_URL.');
  await retry(async () => {
    if (!(await pgAnswers())) throw new Error('not yet');
  }, 20).catch(() => fail(`Postgres was started but does not answer on ${dbUrl.host}`));
}

async function ensureDatabase(): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl.toString() });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [dbName]);
    if (found.rowCount === 0) {
      say(`creating database ${dbName}`);
      await client.query(`create database "${dbName.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created concurrently
      });
    }
  } finally {
    await client.end();
  }
}

// ---------- Redis ----------
const rUrl = new URL(redisUrl);

async function redisAnswers(): Promise<boolean> {
  const redis = new Redis(redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
    return true;
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

async function ensureRedis(): Promise<void> {
  if (await redisAnswers()) return;
  if (!isLocal(rUrl.hostname)) fail(`Redis at ${rUrl.host} does not answer; check REDIS_URL.`);
  if (!has('redis-server') && !aptInstall(['redis-server'])) {
    fail(
      'Redis is not installed. Install it, then run this again:\n  sudo apt-get update && sudo apt-get install -y redis-server',
    );
  }
  const dir = path.join(localDir, 'redis');
  fs.mkdirSync(dir, { recursive: true });
  const port = rUrl.port || '6379';
  say(`starting a private Redis on 127.0.0.1:${port} (data in ${dir})...`);
  const r = spawnSync(
    'redis-server',
    [
      '--daemonize',
      'yes',
      '--bind',
      '127.0.0.1',
      '--port',
      port,
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--logfile',
      path.join(dir, 'redis.log'),
      '--pidfile',
      path.join(dir, 'redis.pid'),
    ],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) fail('could not start redis-server');
  await retry(async () => {
    if (!(await redisAnswers())) throw new Error('not yet');
  }, 10).catch(() => fail(`Redis was started but does not answer on ${rUrl.host}`));
}

await ensurePostgres();
await ensureDatabase();
await ensureRedis();
say(`ready: Postgres ${dbUrl.host}/${dbName}, Redis ${rUrl.host}`);
