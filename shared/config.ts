/**
 * The one place that reads the environment. `loadConfig()` parses and validates every
 * variable once and returns a frozen, typed object; a missing or malformed variable is a
 * `ConfigError` that names it. Defaults are chosen so that nothing needs setting on a
 * developer machine with local Postgres and Redis (see README "Configuration").
 */
import { isIP } from 'node:net';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface Config {
  readonly env: 'development' | 'test' | 'production';
  readonly port: number;
  readonly host: string;
  readonly databaseUrl: string;
  /** Postgres schema the service lives in (tests give each file its own). */
  readonly databaseSchema: string;
  /** Postgres connections per process. */
  readonly databasePoolMax: number;
  readonly redisUrl: string;
  /**
   * Longest wait for a reply on a fail-fast (producer) Redis connection before the command
   * fails (REDIS_COMMAND_TIMEOUT_MS, default 5 s): a stalled Redis answers 503, never a hung request.
   */
  readonly redisCommandTimeoutMs: number;
  /** BullMQ key prefix; tests give each file its own. */
  readonly queuePrefix: string;
  /** How long a worker holds a job's lock; a job whose worker died is taken up again after about this long. */
  readonly workerLockMs: number;
  /** Connected domains, primary first, without trailing slash. */
  readonly publicBaseUrls: readonly string[];
  readonly serviceName: string;
  /** `X-Direct-Taxi-Network-AI-Key`, derived from the service name. */
  readonly apiKeyHeader: string;
  /** Lower-case short name used in key prefixes and references, e.g. `dtn`. */
  readonly serviceCode: string;
  readonly smtpUrl: string;
  readonly mailFrom: string;
  readonly twilio: {
    readonly accountSid: string;
    readonly authToken: string;
    readonly apiBaseUrl: string;
    readonly smsFrom: string;
    readonly whatsappFrom: string;
  };
  readonly logLevel: LogLevel;
  readonly http: {
    /** Largest JSON body accepted, in bytes. */
    readonly bodyLimitBytes: number;
    /** Trust proxy setting for Express (hops), so `req.ip` is the client behind a load balancer. */
    readonly trustProxy: number;
  };
  readonly webhooks: {
    /**
     * Let partner and supplier webhook endpoints be on loopback, private, link-local and other
     * non-public addresses (WEBHOOK_ALLOW_PRIVATE_NETWORKS; default false in production, true in
     * development and test, whose receivers are local). Off, such a URL cannot be registered and
     * the fanout worker refuses to connect to such an address, whatever a name resolves to.
     */
    readonly allowPrivateNetworks: boolean;
    /**
     * Deliveries to one endpoint in flight at once, across every fanout worker
     * (WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT, default 4): an endpoint that hangs holds at most
     * this many of the workers' slots, so other partners' webhooks are not held behind it.
     */
    readonly maxInFlightPerEndpoint: number;
  };
  readonly metrics: {
    /** Bearer token `GET /metrics` requires; empty: only loopback clients may read it. */
    readonly token: string;
    /** A worker process started alone serves its /metrics on this port (0: none). */
    readonly workerPort: number;
  };
  readonly rateLimit: {
    readonly perKeyPerMinute: number;
    readonly perIpPerMinute: number;
  };
  readonly outbox: {
    /** Fallback poll interval of the relay; it is normally woken by LISTEN/NOTIFY. */
    readonly pollMs: number;
    readonly batchSize: number;
  };
  readonly pricing: {
    /** Approved operator multipliers for premium classes (CLASS_MULTIPLIERS=executive=1.4,luxury=1.8). */
    readonly classMultipliers: Readonly<Partial<Record<string, number>>>;
    /** v1 quotes per caller (key, else IP) per hour (SPEC.md section 8: 30). */
    readonly quoteLimitPerHour: number;
    /** How long the API waits for the pricing worker before answering 503. */
    readonly timeoutMs: number;
    /** Where the external map adapter sends drivers' own-key requests (Google Maps Platform, or a stand-in). */
    readonly mapProviderBaseUrl: string;
  };
  readonly dispatch: {
    /** How long a driver has to accept an offer before it goes to the next (default 45 s). */
    readonly offerTimeoutSeconds: number;
    /** A driver who has not reported presence for this long is not available (default 120 s). */
    readonly presenceTtlSeconds: number;
    /** Journeys at least this long may go to national network drivers (tier 2; default 30 miles). */
    readonly distanceHireMiles: number;
    /** Radius around the pickup searched for local drivers (default 15 km). */
    readonly localSearchKm: number;
    /** When every tier is exhausted, dispatch is tried again this often until pickup (default 5 min). */
    readonly retryMinutes: number;
    /** Operators are e-mailed here when a booking finds no driver. */
    readonly operatorEmail: string;
  };
  readonly bookings: {
    /** Bookings are dispatched this long before pickup (at once when pickup is sooner). */
    readonly dispatchLeadMinutes: number;
    /**
     * The lead time of a distance hire (a journey of at least DISTANCE_HIRE_MILES), longer
     * (CONTRACT.md section 4): a national-network driver may be an hour or more away. Default 120.
     */
    readonly distanceLeadMinutes: number;
    /** Booking reference prefix: `DTN` gives `DTN-7K3F9Q`. */
    readonly referencePrefix: string;
    /** Passenger e-mail mail-server check: strict, soft (default) or off (CONTRACT.md section 5). */
    readonly emailMxCheck: 'strict' | 'soft' | 'off';
    /**
     * DNS servers the mail-server check asks (`EMAIL_DNS_SERVERS`, `ip` or `ip:port`, comma
     * separated); empty: the system's resolvers.
     */
    readonly emailDnsServers: readonly string[];
  };
  readonly intake: {
    /** Partner jobs accepted per partner per Europe/London day (DAILY_JOB_LIMIT, default 5000);
     * `partners.daily_job_limit` overrides it for one partner. */
    readonly dailyJobLimit: number;
  };
  readonly mcp: {
    /** Lifetime of an MCP OAuth access token (MCP_ACCESS_TOKEN_TTL_SECONDS, default 1 hour). */
    readonly accessTokenTtlSeconds: number;
    /** Lifetime of a refresh token from its issue; each use rotates it (MCP_REFRESH_TOKEN_TTL_DAYS, default 30). */
    readonly refreshTokenTtlDays: number;
  };
  readonly shutdownTimeoutMs: number;
  /** 32-byte key for sealing secrets at rest (signing secrets, drivers' map keys). */
  readonly dataEncryptionKey: Buffer;
  readonly seedDemo: boolean;
  /** The `simulator` worker role: simulated drivers that serve test-mode bookings through the driver API. */
  readonly simulator: {
    /** Where the driver API is (default http://127.0.0.1:$PORT). */
    readonly apiUrl: string;
    readonly fleetSize: number;
    /** Cities the fleet is spread over, round robin (each a place the gazetteer knows). */
    readonly cities: readonly string[];
    /** Chance of accepting an offer of a booking without a scenario (0 to 1). */
    readonly acceptProbability: number;
    /** A decision on an offer (and each progress step) waits a random time in this range. */
    readonly delayMinMs: number;
    readonly delayMaxMs: number;
    /** Simulated seconds per real second: driving, waiting at pickup and the ride itself. */
    readonly timeScale: number;
    /** How often each driver reports presence and reads its feed. */
    readonly tickMs: number;
  };
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string, fallback?: string): string {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') {
    if (fallback === undefined) throw new ConfigError(name, 'is required');
    return fallback;
  }
  return raw.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `must be 1 or 0 (true or false), got "${env[name]}"`);
}

function fraction(env: Env, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  const n = /^(?:0|1|0?\.\d+|1\.0+)$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n >= 0 && n <= 1)) throw new ConfigError(name, `must be a number from 0 to 1, got "${raw}"`);
  return n;
}

/** The simulator's default cities: the UK's main cities, one council tariff each where we have it. */
export const SIMULATOR_CITIES = [
  'London',
  'Birmingham',
  'Manchester',
  'Leeds',
  'Glasgow',
  'Liverpool',
  'Bristol',
  'Sheffield',
  'Edinburgh',
  'Newcastle upon Tyne',
  'Cardiff',
  'Nottingham',
];

function url(env: Env, name: string, fallback: string, protocols: readonly string[]): string {
  const value = str(env, name, fallback);
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new ConfigError(name, `is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return value;
}

/** The three-word service name as used in the key header: `Direct Taxi Network` → `Direct-Taxi-Network`. */
export function headerNameFor(serviceName: string): string {
  return `X-${serviceName.trim().split(/\s+/).join('-')}-AI-Key`;
}

function serviceCodeFor(serviceName: string): string {
  return serviceName
    .trim()
    .split(/\s+/)
    .map((w) => w[0]?.toLowerCase() ?? '')
    .join('');
}

const DEV_ENCRYPTION_KEY = Buffer.alloc(32, 'direct-taxi-network-dev-only-key');

/** A comma list of DNS servers as node:dns `setServers` takes them: `ip`, `ip:port` or `[ipv6]:port`. */
function dnsServers(env: Env, name: string): string[] {
  const out: string[] = [];
  for (const part of str(env, name, '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(part) ?? /^([^:]+):(\d+)$/.exec(part);
    const host = m ? (m[1] as string) : part;
    const port = m?.[2] !== undefined ? Number(m[2]) : 53;
    if (isIP(host) === 0 || !(port >= 1 && port <= 65_535)) {
      throw new ConfigError(name, `must be a comma list of IP addresses, each with an optional :port, got "${part}"`);
    }
    out.push(part);
  }
  return out;
}

function multipliers(env: Env, name: string, fallback: string): Record<string, number> {
  const raw = str(env, name, fallback);
  const out: Record<string, number> = {};
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z0-9]+)=(\d+(?:\.\d+)?)$/.exec(part);
    const factor = m ? Number(m[2]) : Number.NaN;
    if (!m?.[1] || !(factor >= 1 && factor <= 5)) {
      throw new ConfigError(name, `must be a comma list of class=factor with factors from 1 to 5, got "${part}"`);
    }
    out[m[1]] = factor;
  }
  return out;
}

function encryptionKey(env: Env, mode: Config['env']): Buffer {
  const raw = env.DATA_ENCRYPTION_KEY?.trim();
  if (!raw) {
    if (mode === 'production') throw new ConfigError('DATA_ENCRYPTION_KEY', 'is required in production');
    return DEV_ENCRYPTION_KEY;
  }
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  if (key.length !== 32) {
    throw new ConfigError('DATA_ENCRYPTION_KEY', 'must be 32 bytes, as 64 hex characters or base64');
  }
  return key;
}

export function loadConfig(env: Env = process.env): Config {
  const nodeEnv = str(env, 'NODE_ENV', 'development');
  if (!['development', 'test', 'production'].includes(nodeEnv)) {
    throw new ConfigError('NODE_ENV', `must be development, test or production, got "${nodeEnv}"`);
  }
  const mode = nodeEnv as Config['env'];
  const port = int(env, 'PORT', 3000, 0, 65535);

  const baseUrls = str(env, 'PUBLIC_BASE_URLS', `http://localhost:${port}`)
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean)
    .map((u) => {
      let parsed: URL;
      try {
        parsed = new URL(u);
      } catch {
        throw new ConfigError('PUBLIC_BASE_URLS', `"${u}" is not a valid URL`);
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
        throw new ConfigError('PUBLIC_BASE_URLS', `"${u}" must be http or https`);
      }
      return u.replace(/\/+$/, '');
    });
  if (baseUrls.length === 0) throw new ConfigError('PUBLIC_BASE_URLS', 'must list at least one URL');

  const serviceName = str(env, 'SERVICE_NAME', 'Direct Taxi Network');
  if (!/^[A-Za-z][A-Za-z0-9]*( [A-Za-z][A-Za-z0-9]*)*$/.test(serviceName)) {
    throw new ConfigError('SERVICE_NAME', 'must be words of letters and digits separated by single spaces');
  }

  const schema = str(env, 'DATABASE_SCHEMA', 'public');
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError('DATABASE_SCHEMA', 'must be a lower-case SQL identifier');
  }
  const queuePrefix = str(env, 'QUEUE_PREFIX', 'dtn');
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(queuePrefix)) {
    throw new ConfigError('QUEUE_PREFIX', 'must be 1 to 64 letters, digits, _ or -');
  }
  const logLevel = str(env, 'LOG_LEVEL', mode === 'test' ? 'silent' : 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  }

  const config: Config = {
    env: mode,
    port,
    host: str(env, 'HOST', '0.0.0.0'),
    databaseUrl: url(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/dtn', ['postgres:', 'postgresql:']),
    databaseSchema: schema,
    databasePoolMax: int(env, 'DATABASE_POOL_MAX', 20, 1, 500),
    redisUrl: url(env, 'REDIS_URL', 'redis://127.0.0.1:6379/0', ['redis:', 'rediss:']),
    redisCommandTimeoutMs: int(env, 'REDIS_COMMAND_TIMEOUT_MS', 5_000, 100, 120_000),
    queuePrefix,
    workerLockMs: int(env, 'WORKER_LOCK_MS', 30_000, 1_000, 600_000),
    publicBaseUrls: Object.freeze(baseUrls),
    serviceName,
    apiKeyHeader: headerNameFor(serviceName),
    serviceCode: serviceCodeFor(serviceName),
    smtpUrl: url(env, 'SMTP_URL', 'smtp://127.0.0.1:2525', ['smtp:', 'smtps:']),
    mailFrom: str(env, 'MAIL_FROM', `${serviceName} <no-reply@localhost>`),
    twilio: Object.freeze({
      accountSid: str(env, 'TWILIO_ACCOUNT_SID', 'AC00000000000000000000000000000000'),
      authToken: str(env, 'TWILIO_AUTH_TOKEN', 'local-dev-token'),
      apiBaseUrl: url(env, 'TWILIO_API_BASE_URL', 'https://api.twilio.com', ['http:', 'https:']).replace(/\/+$/, ''),
      smsFrom: str(env, 'TWILIO_SMS_FROM', '+447700900000'),
      whatsappFrom: str(env, 'TWILIO_WHATSAPP_FROM', 'whatsapp:+447700900000'),
    }),
    logLevel,
    http: Object.freeze({
      bodyLimitBytes: int(env, 'HTTP_BODY_LIMIT_BYTES', 1_048_576, 1024, 50 * 1_048_576),
      trustProxy: int(env, 'TRUST_PROXY_HOPS', 0, 0, 10),
    }),
    webhooks: Object.freeze({
      allowPrivateNetworks: bool(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', mode !== 'production'),
      maxInFlightPerEndpoint: int(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT', 4, 1, 256),
    }),
    metrics: Object.freeze({
      token: env.METRICS_TOKEN?.trim() ?? '',
      workerPort: int(env, 'METRICS_PORT', 0, 0, 65_535),
    }),
    rateLimit: Object.freeze({
      perKeyPerMinute: int(env, 'RATE_LIMIT_PER_KEY_PER_MINUTE', 600, 1, 1_000_000),
      perIpPerMinute: int(env, 'RATE_LIMIT_PER_IP_PER_MINUTE', 120, 1, 1_000_000),
    }),
    outbox: Object.freeze({
      pollMs: int(env, 'OUTBOX_POLL_MS', 1000, 10, 60_000),
      batchSize: int(env, 'OUTBOX_BATCH_SIZE', 200, 1, 10_000),
    }),
    pricing: Object.freeze({
      classMultipliers: Object.freeze(multipliers(env, 'CLASS_MULTIPLIERS', 'executive=1.4,luxury=1.8')),
      quoteLimitPerHour: int(env, 'QUOTE_LIMIT_PER_HOUR', 30, 1, 10_000_000),
      timeoutMs: int(env, 'PRICING_TIMEOUT_MS', 5_000, 100, 120_000),
      mapProviderBaseUrl: url(env, 'MAP_PROVIDER_BASE_URL', 'https://maps.googleapis.com', ['http:', 'https:']).replace(
        /\/+$/,
        '',
      ),
    }),
    dispatch: Object.freeze({
      offerTimeoutSeconds: int(env, 'OFFER_TIMEOUT_SECONDS', 45, 1, 3600),
      presenceTtlSeconds: int(env, 'PRESENCE_TTL_SECONDS', 120, 5, 3600),
      distanceHireMiles: int(env, 'DISTANCE_HIRE_MILES', 30, 1, 1000),
      localSearchKm: int(env, 'LOCAL_SEARCH_KM', 15, 1, 100),
      retryMinutes: int(env, 'DISPATCH_RETRY_MINUTES', 5, 1, 24 * 60),
      operatorEmail: (() => {
        const v = str(env, 'OPERATOR_EMAIL', 'operators@localhost');
        if (!/^[^\s@]+@[^\s@]+$/.test(v)) throw new ConfigError('OPERATOR_EMAIL', 'must be an e-mail address');
        return v;
      })(),
    }),
    bookings: Object.freeze({
      dispatchLeadMinutes: int(env, 'DISPATCH_LEAD_MINUTES', 30, 0, 24 * 60),
      distanceLeadMinutes: int(env, 'DISPATCH_DISTANCE_LEAD_MINUTES', 120, 0, 24 * 60),
      referencePrefix: (() => {
        const prefix = str(env, 'BOOKING_REFERENCE_PREFIX', 'DTN');
        if (!/^[A-Z]{2,5}$/.test(prefix))
          throw new ConfigError('BOOKING_REFERENCE_PREFIX', 'must be 2 to 5 capital letters');
        return prefix;
      })(),
      emailMxCheck: (() => {
        const mode = str(env, 'EMAIL_MX_CHECK', 'soft');
        if (mode !== 'strict' && mode !== 'soft' && mode !== 'off')
          throw new ConfigError('EMAIL_MX_CHECK', 'must be strict, soft or off');
        return mode;
      })(),
      emailDnsServers: Object.freeze(dnsServers(env, 'EMAIL_DNS_SERVERS')),
    }),
    intake: Object.freeze({
      dailyJobLimit: int(env, 'DAILY_JOB_LIMIT', 5000, 1, 10_000_000),
    }),
    mcp: Object.freeze({
      accessTokenTtlSeconds: int(env, 'MCP_ACCESS_TOKEN_TTL_SECONDS', 3600, 60, 86_400),
      refreshTokenTtlDays: int(env, 'MCP_REFRESH_TOKEN_TTL_DAYS', 30, 1, 365),
    }),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 25_000, 100, 600_000),
    dataEncryptionKey: encryptionKey(env, mode),
    seedDemo: bool(env, 'SEED_DEMO', false),
    simulator: Object.freeze({
      apiUrl: url(env, 'SIMULATOR_API_URL', `http://127.0.0.1:${port}`, ['http:', 'https:']).replace(/\/+$/, ''),
      fleetSize: int(env, 'SIMULATOR_FLEET_SIZE', 24, 0, 10_000),
      cities: Object.freeze(
        str(env, 'SIMULATOR_CITIES', SIMULATOR_CITIES.join(','))
          .split(',')
          .map((c) => c.trim())
          .filter(Boolean),
      ),
      acceptProbability: fraction(env, 'SIMULATOR_ACCEPT_PROBABILITY', 0.85),
      ...(() => {
        const delayMinMs = int(env, 'SIMULATOR_DELAY_MIN_MS', 2_000, 0, 600_000);
        const delayMaxMs = int(env, 'SIMULATOR_DELAY_MAX_MS', 8_000, 0, 600_000);
        if (delayMaxMs < delayMinMs)
          throw new ConfigError('SIMULATOR_DELAY_MAX_MS', `must be at least SIMULATOR_DELAY_MIN_MS (${delayMinMs})`);
        return { delayMinMs, delayMaxMs };
      })(),
      timeScale: int(env, 'SIMULATOR_TIME_SCALE', 30, 1, 1_000_000),
      tickMs: int(env, 'SIMULATOR_TICK_MS', 2_000, 20, 600_000),
    }),
  };
  return Object.freeze(config);
}
