import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_ROLES } from '../shared/queues/registry.ts';
import { startDnsStub } from './helpers/dns-stub.ts';
import { createTestEnv, eventually, type TestEnv } from './helpers/env.ts';
import { ROOT, runTs, startTs } from './helpers/process.ts';

/**
 * `npm start` as a newcomer runs it (minus the bootstrap): one process that migrates, seeds
 * the demo data, serves the API and runs every worker role, answers /readyz, and stops
 * cleanly on SIGTERM. Then the Procfile's process types, one role each.
 */
let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv({ migrate: false });
});
afterAll(async () => {
  await env?.cleanup();
});

async function freePort(): Promise<number> {
  const srv = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => srv.once('listening', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * `npm start` as a newcomer runs it on a machine without SMTP_URL, in a schema of its own
 * (`suffix`), ready; `stop` ends it and drops the schema.
 */
async function startWithoutSmtp(suffix: string, mailCheck: Record<string, string> = { EMAIL_MX_CHECK: 'off' }) {
  const port = await freePort();
  const schema = `${env.config.databaseSchema}_${suffix}`;
  const { SMTP_URL: _none, EMAIL_MX_CHECK: _unset, ...withoutSmtp } = env.childEnv;
  const proc = startTs('bin/start.ts', [], {
    ...withoutSmtp,
    DATABASE_SCHEMA: schema,
    PORT: String(port),
    SEED_DEMO: '0',
    ...mailCheck,
    PUBLIC_BASE_URLS: `http://127.0.0.1:${port}`,
  });
  const stop = async () => {
    proc.child.kill('SIGTERM');
    await proc.exited;
    await env.rt.db.raw('drop schema if exists ?? cascade', [schema]);
  };
  try {
    await eventually(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 30_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return { proc, port, stop };
}

describe('the start command', () => {
  it('brings up the API and every worker role with the demo data, ready, and shuts down gracefully', async () => {
    const port = await freePort();
    // SEED_DEMO left unset, as a newcomer runs `npm start`: the demo data is loaded by default.
    const { SEED_DEMO: _unset, ...inherited } = env.childEnv;
    // A resolver that says "no such domain" to everything, as on a machine without DNS: the
    // banner warns that live bookings' mail-server check would refuse every address.
    const offline = await startDnsStub({});
    const online = await startDnsStub({ 'gmail.com': { mx: 'gmail-smtp-in.l.google.com' } });
    const childEnv = {
      ...inherited,
      PORT: String(port),
      LOG_LEVEL: 'info',
      PUBLIC_BASE_URLS: `http://127.0.0.1:${port}`,
      EMAIL_MX_CHECK: 'soft',
      EMAIL_DNS_SERVERS: offline.server,
    };
    const proc = startTs('bin/start.ts', [], childEnv);
    try {
      const ready = await eventually(async () => {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        return res.status === 200 ? res.json() : null;
      }, 30_000);
      expect(ready).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', migrations: 'ok' } });
      const out = proc.output();
      for (const role of WORKER_ROLES) expect(out).toContain(`"workerRole":"${role}"`);
      const key = /demoApiKey: (dtn_test_\w+)/.exec(out)?.[1];
      expect(key).toBeDefined();
      const who = await fetch(`http://127.0.0.1:${port}/api/public/v1/whoami`, {
        headers: { 'x-api-key': key as string },
      });
      expect(await who.json()).toMatchObject({ authenticated: true, key: { name: 'demo', mode: 'test' } });
      expect(out).toContain("e-mail check: this machine's DNS says gmail.com has no mail server");
      expect(out).toContain('EMAIL_MX_CHECK=soft live bookings and the MCP sign-in will refuse every address');
      expect(offline.questions).toContain('gmail.com MX');
    } finally {
      proc.child.kill('SIGTERM');
    }
    const exited = await proc.exited;
    expect(exited.code).toBe(0);
    expect(exited.stdout).toContain('"msg":"stopped"');

    // A second start finds the demo data and creates nothing new; with working DNS, no warning.
    const again = startTs('bin/start.ts', [], { ...childEnv, EMAIL_DNS_SERVERS: online.server });
    try {
      await eventually(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 30_000);
      expect(again.output()).toContain('demo data already present');
      expect(online.questions).toContain('gmail.com MX');
      expect(again.output()).not.toContain('e-mail check');
    } finally {
      again.child.kill('SIGTERM');
      await offline.close();
      await online.close();
    }
    expect((await again.exited).code).toBe(0);
    expect(await env.rt.db('partners').count({ n: '*' })).toEqual([{ n: 1 }]);
  });

  it('starts with an empty database when SEED_DEMO=0', async () => {
    const port = await freePort();
    const proc = startTs('bin/start.ts', [], {
      ...env.childEnv,
      DATABASE_SCHEMA: `${env.config.databaseSchema}_e`,
      PORT: String(port),
      SEED_DEMO: '0',
    });
    try {
      await eventually(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 30_000);
      const n = await env.rt.db.withSchema(`${env.config.databaseSchema}_e`).from('api_keys').count({ n: '*' });
      expect(n).toEqual([{ n: 0 }]);
    } finally {
      proc.child.kill('SIGTERM');
      await proc.exited;
      await env.rt.db.raw('drop schema if exists ?? cascade', [`${env.config.databaseSchema}_e`]);
    }
  });

  it('without SMTP_URL, catches the e-mails and prints them, so a code can be read on a machine with no mail server', async () => {
    // found in a probe: on a machine whose DNS cannot confirm gmail.com, the default check refused
    // every live address, so no code ever reached the catcher; without EMAIL_MX_CHECK it is off there
    const offline = await startDnsStub({});
    const { proc, port, stop } = await startWithoutSmtp('m', { EMAIL_DNS_SERVERS: offline.server });
    try {
      expect(proc.output()).toContain('e-mail:      caught here on 127.0.0.1:2525 (no SMTP_URL)');
      expect(proc.output()).toContain(
        "e-mail check: off: this machine's DNS cannot confirm that gmail.com has a mail server",
      );
      const email = `newcomer-${Date.now()}@gmail.com`;
      const asked = await fetch(`http://127.0.0.1:${port}/api/public/v1/passenger-verify`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email }),
      });
      expect(asked.status).toBe(200);
      const printed = await eventually(async () => {
        const out = proc.output();
        const at = out.indexOf(`--- e-mail to ${email} ---`);
        return at === -1 ? null : out.slice(at, out.indexOf('--- end of e-mail ---', at));
      }, 20_000);
      expect(printed).toMatch(/Subject: \d{6} is your Direct Taxi Network verification code/);
      expect(printed).toMatch(/verification code is: \d{6}/);
    } finally {
      await stop();
    }
  });

  it('without SMTP_URL and with the mail port already taken, starts and sends the e-mails there', async () => {
    // Whatever holds 127.0.0.1:2525 (a second instance's catcher, a developer's mail server).
    const holder = net.createServer((socket) => socket.end('421 busy\r\n'));
    const held = await new Promise<boolean>((resolve) => {
      holder.once('error', () => resolve(false)); // taken already: as good for this test
      holder.listen(2525, '127.0.0.1', () => resolve(true));
    });
    try {
      const { proc, stop } = await startWithoutSmtp('t');
      try {
        expect(proc.output()).toContain('e-mail:      sent to smtp://127.0.0.1:2525');
        expect(proc.output()).not.toContain('EADDRINUSE');
      } finally {
        await stop();
      }
    } finally {
      if (held) await new Promise((r) => holder.close(r));
    }
  });

  it('names the variable when the configuration is wrong', async () => {
    const r = await runTs('bin/start.ts', [], { ...env.childEnv, PORT: 'eighty' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('configuration error: PORT: must be a whole number');
  });
});

describe('stopping under npm', () => {
  it('stops gracefully when SIGTERM reaches the whole process group (npm passes its own copy on): not as a second signal', async () => {
    // As systemd's control-group kill or `kill -- -PGID` does: npm, its shell and node all get it.
    const child = spawn('npm', ['run', '-s', 'worker', '--', 'notify'], {
      cwd: ROOT,
      env: { ...env.childEnv, LOG_LEVEL: 'info' },
      detached: true,
    });
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      await eventually(async () => out.includes('"msg":"worker started"'), 30_000);
      process.kill(-(child.pid as number), 'SIGTERM');
      expect(await exited, out.slice(-3000)).toBe(0);
      expect(out).toContain('"msg":"stopped"');
      expect(out).not.toContain('second signal');
    } finally {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }, 60_000);
});

describe('the Procfile', () => {
  const procfile = fs.readFileSync(path.join(ROOT, 'Procfile'), 'utf8');
  const types = Object.fromEntries(
    procfile
      .split('\n')
      .filter((l) => /^[a-z-]+:/.test(l))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
  );

  it('declares web, release and one process type per worker role', () => {
    expect(Object.keys(types).sort()).toEqual(['release', 'web', ...WORKER_ROLES].sort());
    for (const role of WORKER_ROLES) expect(types[role]).toBe(`npm run worker -- ${role}`);
  });

  it('runs one role per process: a worker role starts alone and stops on SIGTERM', async () => {
    const proc = startTs('workers/main.ts', ['notify'], { ...env.childEnv, LOG_LEVEL: 'info' });
    try {
      await eventually(async () => proc.output().includes('"msg":"worker started"'), 20_000);
      expect(proc.output()).not.toContain('"workerRole":"dispatch"');
    } finally {
      proc.child.kill('SIGTERM');
    }
    const exited = await proc.exited;
    expect(exited.code, `signal ${exited.signal}\n${exited.stdout.slice(-2000)}\n${exited.stderr.slice(-2000)}`).toBe(
      0,
    );
    const bad = await runTs('workers/main.ts', ['teleport'], env.childEnv);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown role teleport');
  });
});
