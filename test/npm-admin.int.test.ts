import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../shared/services/api-keys.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';
import { ROOT } from './helpers/process.ts';

/**
 * The operator CLI as CONTRACT.md section 9 names it, `npm run admin -- <command>`, through npm
 * itself: its stdout is the one JSON document (npm's own "> pkg admin" banner is silenced by the
 * project's .npmrc), and a refusal is JSON on stderr with exit 1.
 */
let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(async () => {
  await env?.cleanup();
});

function npmAdmin(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', 'admin', '--', ...args],
      { cwd: ROOT, env: { ...env.childEnv, DTN_OPERATOR: 'ops-test' }, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

describe('npm run admin', () => {
  it('prints only the JSON document on stdout, and a refusal as JSON on stderr', async () => {
    const made = await createApiKey(env.rt.db, { serviceCode: env.config.serviceCode, name: 'listed by npm' });
    const listed = await npmAdmin(['key', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    const keys = JSON.parse(listed.stdout) as { id: string; name: string }[];
    expect(keys.map((k) => k.id)).toContain(made.id);
    const refused = await npmAdmin(['key', 'revoke', 'not-a-key-id']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(JSON.parse(refused.stderr)).toEqual({
      error: { code: 'invalid_input', message: 'ID must be an id (UUID)' },
    });
  }, 90_000);
});
