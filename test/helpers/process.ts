import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..', '..');
/**
 * How entry points run, here as in package.json's scripts: `node --import tsx <script>`, one
 * process. (The tsx CLI would run the script in a second node process under it and relay
 * signals, force-killing the script when it does not confirm a SIGTERM within 30 ms: on a busy
 * machine that turned graceful shutdowns into exit 143.)
 */
export const NODE_TS = [process.execPath, '--import', 'tsx'] as const;

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Run a TypeScript entry point to completion. */
export function runTs(script: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 30_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE_TS[0], [...NODE_TS.slice(1), path.join(ROOT, script), ...args], { env, cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} ${args.join(' ')} did not finish in ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Start a long-running TypeScript entry point; the caller stops it. */
export function startTs(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): { child: ChildProcess; output: () => string; exited: Promise<Ran> } {
  const child = spawn(NODE_TS[0], [...NODE_TS.slice(1), path.join(ROOT, script), ...args], { env, cwd: ROOT });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  const exited = new Promise<Ran>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, output: () => stdout + stderr, exited };
}
