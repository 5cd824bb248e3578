/**
 * Where tests run: TEST_DATABASE_URL / TEST_REDIS_URL, else a dedicated local database
 * `dtn_test` and Redis database 0 (each test file isolates itself with its own schema and
 * key prefix). Never DATABASE_URL, so tests do not touch a developer's own data.
 */
export function testDatabaseUrl(): string {
  return process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/dtn_test';
}

export function testRedisUrl(): string {
  return process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
}
