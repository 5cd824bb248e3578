import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { loadConfig } from '../shared/config.ts';

/**
 * What every benchmark shares: the environment the servers under test run in (a schema and a
 * queue prefix of their own), starting and stopping them as child processes, the HTTP load
 * (autocannon, in the benchmark's own process) and the CPU and memory of each process.
 */
export const ROOT = path.resolve(import.meta.dirname, '..');
/** Entry points run as in package.json's scripts: `node --import tsx <script>`, one process each. */
export const NODE_TS = ['--import', 'tsx'] as const;
export const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

export const id = randomBytes(4).toString('hex');
export const baseEnv: Record<string, string> = {
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '',
  NODE_ENV: 'production',
  DATA_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
  LOG_LEVEL: 'warn',
  DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/dtn',
  DATABASE_SCHEMA: `bench_${id}`,
  REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0',
  QUEUE_PREFIX: `bench-${id}`,
  QUOTE_LIMIT_PER_HOUR: '10000000',
  RATE_LIMIT_PER_IP_PER_MINUTE: '1000000',
  RATE_LIMIT_PER_KEY_PER_MINUTE: '1000000',
  // No DNS during the benchmark; every address is a fresh, unconfirmed one.
  EMAIL_MX_CHECK: 'off',
  // The status webhook receiver is on 127.0.0.1 (production refuses non-public addresses).
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
};
export const config = loadConfig(baseEnv);
export const children: ChildProcess[] = [];

export function start(
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [...NODE_TS, ...args], {
    cwd: ROOT,
    env: { ...baseEnv, ...extraEnv },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d) => {
      out += d;
      const m = /PORT (\d+)/.exec(out);
      if (m) resolve({ port: Number(m[1]), child });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
}

export async function stop(child: ChildProcess): Promise<void> {
  // Exited already, by itself or by a signal.
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([done, new Promise((r) => setTimeout(r, 5000))]);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

export interface HttpResult {
  name: string;
  requestsPerSecond: number;
  p50ms: number;
  p99ms: number;
  non2xx: number;
  errors: number;
  /** CPU and memory of the processes serving the run, when they were watched. */
  processes?: ProcessStats[];
  /**
   * When watched: each process's CPU per request, in ms of one core. Steadier than requests a
   * second on a machine whose speed changes from one run to the next.
   */
  cpuMsPerRequest?: Record<string, number>;
}

/** Processes to watch during a measured run (`steady`): name → child process or pid. */
export type Watch = Record<string, ChildProcess | number | undefined>;

/** Seconds of load before each measured window, on the same connections. */
const WARM_UP_SECONDS = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One run of `opts` at its `connections`: WARM_UP_SECONDS of load (JIT, connection pools, lazy
 * data), then `seconds` measured on the same connections, then it stops. Requests a second,
 * p50 and p99 are of the responses that arrive in the measured window, and each watched
 * process's CPU is read over that window only (per request, in ms of one core).
 *
 * One autocannon run, not a warm-up run and then a measured one: autocannon stops at its
 * duration without waiting for its requests in flight, and a new run opens all its connections
 * at once, so the measured run began with the warm-up's last requests still being answered
 * and 50 new connections asking together, twice the concurrency measured. On a 2-core machine
 * that first half second reached 300–390 ms, a tail counted in every run's p99 (the booking
 * runs' steady p99 was 100–190 ms).
 */
export async function steady(
  name: string,
  opts: autocannon.Options,
  seconds = DURATION,
  watch?: Watch,
): Promise<HttpResult> {
  const latencies: number[] = [];
  let non2xx = 0;
  let errors = 0;
  let counting = false;
  let instance: autocannon.Instance | undefined;
  const done = new Promise<void>((resolve, reject) => {
    // Longer than needed: it is stopped at the end of the measured window.
    instance = autocannon({ ...opts, duration: WARM_UP_SECONDS + seconds + 30 }, (err) =>
      err ? reject(err) : resolve(),
    );
  });
  // Awaited after the window; an early failure is not an unhandled rejection meanwhile.
  done.catch(() => {});
  const run = instance as autocannon.Instance;
  run.on('response', (_client, status: number, _bytes, ms: number) => {
    if (!counting) return;
    latencies.push(ms);
    if (status < 200 || status >= 300) non2xx += 1;
  });
  run.on('reqError', () => {
    if (counting) errors += 1;
  });
  await sleep(WARM_UP_SECONDS * 1000);
  const window = async () => {
    counting = true;
    const t0 = performance.now();
    await sleep(seconds * 1000);
    counting = false;
    return (performance.now() - t0) / 1000;
  };
  const watched = watch ? await watchProcesses(watch, window) : { result: await window(), processes: undefined };
  run.stop();
  await done;
  const elapsed = watched.result;
  const total = latencies.length;
  latencies.sort((a, b) => a - b);
  // Nearest rank: the smallest latency at least q of the responses did not exceed.
  const pct = (q: number) => (total > 0 ? Math.round(latencies[Math.ceil(q * total) - 1] as number) : 0);
  const row: HttpResult = {
    name,
    requestsPerSecond: Math.round(total / elapsed),
    p50ms: pct(0.5),
    p99ms: pct(0.99),
    non2xx,
    errors,
  };
  if (!watched.processes) return row;
  const cpuMsPerRequest = Object.fromEntries(
    watched.processes.map((p) => [
      p.name,
      total > 0 ? Math.round(((p.cpuPercent * 10 * elapsed) / total) * 1000) / 1000 : 0,
    ]),
  );
  return { ...row, processes: watched.processes, cpuMsPerRequest };
}

export const ratio = (a: HttpResult, b: HttpResult): number =>
  Math.round((a.requestsPerSecond / b.requestsPerSecond) * 100) / 100;

export function load(
  name: string,
  url: string,
  body: unknown,
  connections = CONNECTIONS,
  seconds = DURATION,
  watch?: Watch,
): Promise<HttpResult> {
  return steady(
    name,
    { url, method: 'POST', connections, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    seconds,
    watch,
  );
}

/** CPU and memory of one process (and any children it has) over a run. */
export interface ProcessStats {
  name: string;
  /** CPU time over wall time, in percent of one core (200 is both cores of a 2-core machine). */
  cpuPercent: number;
  /** The most memory seen (proportional set size: shared pages split among their sharers), MiB. */
  peakMemoryMiB: number;
}

const CLOCK_TICKS_PER_SECOND = 100;
const PAGE_BYTES = 4096;

/** utime + stime (clock ticks), RSS (pages) and parent of every process, from /proc. */
function readProcTable(): Map<number, { ppid: number; ticks: number; rssPages: number }> {
  const table = new Map<number, { ppid: number; ticks: number; rssPages: number }>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return table;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name is in parentheses and may hold spaces: fields are counted after it.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), {
        ppid: Number(f[1]),
        ticks: Number(f[11]) + Number(f[12]),
        rssPages: Number(f[21]),
      });
    } catch {
      // The process ended while we looked.
    }
  }
  return table;
}

/** A process and its descendants (a negative pid: that process alone): CPU ticks used, and their pids. */
function treeUsage(table: ReturnType<typeof readProcTable>, root: number): { ticks: number; pids: number[] } {
  if (root < 0) return { ticks: table.get(-root)?.ticks ?? 0, pids: table.has(-root) ? [-root] : [] };
  const children = new Map<number, number[]>();
  for (const [pid, p] of table) children.set(p.ppid, [...(children.get(p.ppid) ?? []), pid]);
  let ticks = 0;
  const pids: number[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    const p = table.get(pid);
    if (!p) continue;
    ticks += p.ticks;
    pids.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return { ticks, pids };
}

/**
 * Memory of these processes, bytes: the sum of their proportional set sizes (shared pages
 * divided among the processes sharing them, so Postgres' shared buffers count once however
 * many backends map them), else of their resident sets where /proc gives no PSS.
 */
function memoryOf(table: ReturnType<typeof readProcTable>, pids: readonly number[]): number {
  let bytes = 0;
  for (const pid of pids) {
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      if (m) {
        bytes += Number(m[1]) * 1024;
        continue;
      }
    } catch {
      // No smaps_rollup (older kernel, or the process ended): its resident set below.
    }
    bytes += (table.get(pid)?.rssPages ?? 0) * PAGE_BYTES;
  }
  return bytes;
}

/**
 * Watch named processes while `fn` runs (sampled every 500 ms from /proc; Linux only, else
 * no figures): each one's CPU in percent of one core and its peak resident memory.
 * `self` adds this process (the load generator) as "load generator".
 */
export async function watchProcesses<T>(
  procs: Record<string, ChildProcess | number | undefined>,
  fn: () => Promise<T>,
  opts: { self?: boolean } = {},
): Promise<{ result: T; processes: ProcessStats[] }> {
  const roots: Array<[string, number]> = Object.entries(procs).flatMap(([name, c]) => {
    const pid = typeof c === 'number' ? c : c?.pid;
    return pid !== undefined ? [[name, pid] as [string, number]] : [];
  });
  // This process alone (its children are the servers, watched by name).
  if (opts.self) roots.push(['load generator', -process.pid]);
  // CPU per pid of each tree: ticks at the start (0 for a process born later) and the most seen,
  // so a process that exits during the run keeps what it used until its last sample.
  const first = readProcTable();
  const startTicks = new Map<string, Map<number, number>>();
  const lastTicks = new Map<string, Map<number, number>>();
  for (const [name, pid] of roots) {
    const u = treeUsage(first, pid);
    startTicks.set(name, new Map(u.pids.map((p) => [p, first.get(p)?.ticks ?? 0])));
    lastTicks.set(name, new Map());
  }
  const peak = new Map<string, number>();
  const sample = () => {
    const table = readProcTable();
    for (const [name, pid] of roots) {
      const u = treeUsage(table, pid);
      const last = lastTicks.get(name) as Map<number, number>;
      for (const p of u.pids) last.set(p, Math.max(last.get(p) ?? 0, table.get(p)?.ticks ?? 0));
      peak.set(name, Math.max(peak.get(name) ?? 0, memoryOf(table, u.pids)));
    }
  };
  const used = (name: string): number => {
    const start = startTicks.get(name) as Map<number, number>;
    let ticks = 0;
    for (const [p, t] of lastTicks.get(name) ?? []) ticks += t - (start.get(p) ?? 0);
    return ticks;
  };
  sample();
  const t0 = performance.now();
  const timer = setInterval(sample, 500);
  try {
    const result = await fn();
    sample();
    const seconds = (performance.now() - t0) / 1000;
    const processes = roots.map(([name]) => ({
      name,
      cpuPercent: Math.round((used(name) / CLOCK_TICKS_PER_SECOND / seconds) * 100),
      peakMemoryMiB: Math.round((peak.get(name) ?? 0) / 2 ** 20),
    }));
    return { result, processes };
  } finally {
    clearInterval(timer);
  }
}

/**
 * Postgres (the postmaster and every backend under it) and Redis on this machine, found by
 * command name, to watch beside our own processes: on a small machine they share its cores.
 */
export function systemProcesses(): Record<string, number> {
  const found: Record<string, number> = {};
  const table = readProcTable();
  for (const [pid, p] of table) {
    let comm = '';
    try {
      comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    const parentComm = (() => {
      try {
        return fs.readFileSync(`/proc/${p.ppid}/comm`, 'utf8').trim();
      } catch {
        return '';
      }
    })();
    if ((comm === 'postgres' || comm === 'postmaster') && parentComm !== comm) found.postgres = pid;
    if (comm === 'redis-server' && !found.redis) found.redis = pid;
  }
  return found;
}

/** "api 93% 140 MiB, pricing 41% 120 MiB": a run's processes in one line. */
export const processLine = (ps: readonly ProcessStats[] | undefined): string =>
  (ps ?? []).map((p) => `${p.name} ${p.cpuPercent}% ${p.peakMemoryMiB} MiB`).join(', ');

/** The q-quantile of `values` (sorted here), rounded to ms. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN);
}
