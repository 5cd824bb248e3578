/**
 * Failpoints for crash tests: `DTN_FAILPOINTS=outbox-after-enqueue` makes the process kill
 * itself with SIGKILL when it reaches that point, exactly as a power cut would. Ignored when
 * NODE_ENV=production. Names in use: outbox-after-enqueue, dispatch-after-offer.
 */
const active = new Set(
  process.env.NODE_ENV === 'production'
    ? []
    : (process.env.DTN_FAILPOINTS ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
);

export function failpoint(name: string): void {
  if (active.has(name)) process.kill(process.pid, 'SIGKILL');
}
