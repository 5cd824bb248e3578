import type { Logger } from './logger.ts';

/**
 * A signal this soon after the first is the same stop, delivered twice: a process group's
 * SIGTERM (`kill -- -PGID`, systemd's control-group kill, Ctrl-C in a terminal) reaches the
 * process directly and again through `npm run`, which passes its own copy on to its child.
 */
export const SAME_SIGNAL_MS = 1000;

/**
 * Bounded graceful shutdown: the first SIGTERM or SIGINT runs `stop` (stop accepting work,
 * let in-flight work finish, close connections); if that takes longer than `timeoutMs`, or a
 * second signal arrives (`SAME_SIGNAL_MS` or more after the first), the process exits at once.
 */
export function handleShutdown(logger: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  let firstAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      if (Date.now() - firstAt < SAME_SIGNAL_MS) {
        logger.info(
          { signal },
          'signal repeated at once (a process group and npm both passed it on): still stopping gracefully',
        );
        return;
      }
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    firstAt = Date.now();
    logger.info({ signal, timeoutMs }, 'shutting down gracefully');
    const timer = setTimeout(() => {
      logger.error({ timeoutMs }, 'graceful shutdown timed out: exiting');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** True when this module is the entry point (`tsx path/to/file.ts`). */
export function isMain(importMetaUrl: string): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  const url = new URL(importMetaUrl).pathname;
  return url === entry || url.replace(/\.ts$/, '') === entry.replace(/\.ts$/, '');
}

/**
 * Load the configuration for an entry point, or print the variable at fault and exit 1; with
 * `json` (the operator CLI, whose errors are JSON on stderr: CONTRACT.md section 9) as
 * `{"error": {"code": "configuration_error", "message": ...}}`.
 */
export async function configOrExit(opts: { json?: boolean } = {}): Promise<import('./config.ts').Config> {
  const { ConfigError, loadConfig } = await import('./config.ts');
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(
        opts.json
          ? `${JSON.stringify({ error: { code: 'configuration_error', message: err.message } })}\n`
          : `configuration error: ${err.message}\n`,
      );
      process.exit(1);
    }
    throw err;
  }
}
