import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';

/** A logger (warn and up) whose lines a test reads, parsed, as a runner or relay writes them. */
export function capturingLogger(): { lines: Record<string, unknown>[]; logger: Logger } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: pino({ level: 'warn' }, sink) };
}
