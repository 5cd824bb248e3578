import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../shared/config.ts';

describe('config', () => {
  it('needs nothing set on a local machine', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 3000,
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/dtn',
      redisUrl: 'redis://127.0.0.1:6379/0',
      publicBaseUrls: ['http://localhost:3000'],
      serviceName: 'Direct Taxi Network',
      apiKeyHeader: 'X-Direct-Taxi-Network-AI-Key',
      serviceCode: 'dtn',
      twilio: { apiBaseUrl: 'https://api.twilio.com' },
      seedDemo: false,
    });
    expect(Object.isFrozen(c)).toBe(true);
    // The mail-server check is on, softly: only a domain that certainly has no mail server is refused.
    expect(c.bookings.emailMxCheck).toBe('soft');
    expect(() => loadConfig({ EMAIL_MX_CHECK: 'sometimes' })).toThrow(ConfigError);
    expect(loadConfig({ EMAIL_MX_CHECK: 'strict' }).bookings.emailMxCheck).toBe('strict');
  });

  it('reads the environment, the first base URL being primary', () => {
    const c = loadConfig({
      PORT: '8080',
      PUBLIC_BASE_URLS: 'https://directtaxi.example/, https://book.example',
      SERVICE_NAME: 'Quick Cab Company',
      TWILIO_API_BASE_URL: 'http://127.0.0.1:9999/',
      SEED_DEMO: '1',
      EMAIL_DNS_SERVERS: '10.0.0.2, 127.0.0.1:5353,[::1]:53,[::1],::1',
    });
    expect(c.port).toBe(8080);
    expect(c.bookings.emailDnsServers).toEqual(['10.0.0.2', '127.0.0.1:5353', '[::1]:53', '[::1]', '::1']);
    expect(loadConfig({}).bookings.emailDnsServers).toEqual([]);
    expect(c.publicBaseUrls).toEqual(['https://directtaxi.example', 'https://book.example']);
    expect(c.apiKeyHeader).toBe('X-Quick-Cab-Company-AI-Key');
    expect(c.twilio.apiBaseUrl).toBe('http://127.0.0.1:9999');
    expect(c.seedDemo).toBe(true);
  });

  it.each([
    ['PORT', { PORT: 'eighty' }],
    ['PORT', { PORT: '70000' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['REDIS_URL', { REDIS_URL: 'not a url' }],
    ['PUBLIC_BASE_URLS', { PUBLIC_BASE_URLS: 'ftp://x' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
    ['SEED_DEMO', { SEED_DEMO: 'maybe' }],
    ['SMTP_URL', { SMTP_URL: 'http://mail' }],
    ['DATA_ENCRYPTION_KEY', { DATA_ENCRYPTION_KEY: 'short' }],
    ['DATA_ENCRYPTION_KEY', { NODE_ENV: 'production' }],
    ['EMAIL_DNS_SERVERS', { EMAIL_DNS_SERVERS: 'dns.example' }],
    ['EMAIL_DNS_SERVERS', { EMAIL_DNS_SERVERS: '127.0.0.1:99999' }],
    ['EMAIL_DNS_SERVERS', { EMAIL_DNS_SERVERS: '[dns.example]:53' }],
  ])('names %s when it is wrong', (variable, env) => {
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe(variable);
    expect((err as Error).message).toMatch(new RegExp(`^${variable}: `));
  });
});
