/**
 * Failpoints for crash tests: `DTN_FAILPOINTS=outbox-after-enqueue` makes the process kill
 * itself with SIGKILL when it reaches that point, exactly as a power cut would; `name@N` waits
 * for the Nth time the point is reached (so a process dies in the middle of a burst, with other
 * work in flight). Ignored when NODE_ENV=production. Names in use: outbox-after-enqueue,
 * dispatch-after-offer, billing-after-issue.
 */
const active = new Map<string, number>(
  process.env.NODE_ENV === 'production'
    ? []
    : (process.env.DTN_FAILPOINTS ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
        .map((s) => {
          const [name = '', nth] = s.split('@');
          const n = Number(nth ?? 1);
          return [name, Number.isInteger(n) && n > 0 ? n : 1] as const;
        }),
);

export function failpoint(name: string): void {
  const left = active.get(name);
  if (left === undefined) return;
  if (left > 1) active.set(name, left - 1);
  else process.kill(process.pid, 'SIGKILL');
}
