import { type Logger, pino } from 'pino';
import type { LogLevel } from './config.ts';

/**
 * Paths whose values never reach a log line: credentials in headers, and personal data
 * (phones, e-mails) wherever a log object carries them. pino's redaction is path based, so
 * the common nestings are listed; code logs ids, not people.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-signature"]',
  'req.headers["x-direct-taxi-network-ai-key"]',
  'req.headers.cookie',
  'req.headers["webhook-signature"]',
  'res.headers["set-cookie"]',
  '*.apiKey',
  '*.key',
  '*.token',
  '*.secret',
  '*.signingSecret',
  '*.webhookSecret',
  '*.password',
  '*.email',
  '*.phone',
  '*.passengerEmail',
  '*.passengerPhone',
  '*.passenger_email',
  '*.passenger_phone',
  '*.to',
  'apiKey',
  'token',
  'secret',
  'email',
  'phone',
];

export function createLogger(opts: { level: LogLevel; name: string; apiKeyHeader?: string }): Logger {
  const paths = [...REDACT_PATHS];
  if (opts.apiKeyHeader) paths.push(`req.headers["${opts.apiKeyHeader.toLowerCase()}"]`);
  return pino({
    name: opts.name,
    level: opts.level,
    redact: { paths, censor: '[redacted]' },
    base: { pid: process.pid, role: opts.name },
  });
}

export type { Logger };
