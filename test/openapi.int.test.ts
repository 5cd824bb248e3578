import { validate } from '@readme/openapi-parser';
import { Type } from '@sinclair/typebox';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineRoute } from '../api/route.ts';
import { StringEnum } from '../shared/schemas/common.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

const later = defineRoute({
  method: 'post',
  path: '/api/public/v1/test-later/:ref',
  operationId: 'testLater',
  summary: 'A route added after the document was written',
  tags: ['test'],
  auth: 'key',
  params: Type.Object({ ref: Type.String({ pattern: '^DTN-[0-9A-Z]{6}$' }) }),
  query: Type.Object({ email: Type.String({ format: 'email' }) }),
  body: Type.Object({ action: StringEnum(['cancel'] as const), reason: Type.Optional(Type.String()) }),
  errors: ['booking_not_found', 'email_mismatch'],
  responses: { 200: { description: 'Cancelled', schema: Type.Object({ status: Type.String() }) } },
  handler: () => ({ status: 200, body: { status: 'cancelled' } }),
});

let env: TestEnv;
let http: Served;
const BASES = 'https://directtaxi.example,https://book.directtaxi.example,http://localhost:3000';

beforeAll(async () => {
  env = await createTestEnv({ env: { PUBLIC_BASE_URLS: BASES } });
  http = await serve(await appFor(env, [later]));
});
afterAll(async () => {
  await http?.close();
  await env?.cleanup();
});

// biome-ignore lint/suspicious/noExplicitAny: a parsed JSON document, navigated by the assertions
type Json = Record<string, any>;

async function doc(path: string): Promise<Json> {
  const res = await fetch(`${http.url}${path}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Json;
}

describe('OpenAPI documents', () => {
  it.each(['/api/public/openapi.json', '/api/public/v1/openapi.json'])('%s validates as OpenAPI 3.1', async (path) => {
    const d = await doc(path);
    expect(d.openapi).toBe('3.1.0');
    expect(d.info.version).toBe('1.0.0');
    const result = await validate(structuredClone(d) as never);
    expect(result.valid ? [] : result.errors).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('lists every connected domain as a server in the v1 document', async () => {
    const d = await doc('/api/public/v1/openapi.json');
    expect(d.servers).toEqual(BASES.split(',').map((url) => ({ url })));
  });

  it('includes a route added later, with its parameters, body, security and errors', async () => {
    const d = await doc('/api/public/v1/openapi.json');
    const op = d.paths['/api/public/v1/test-later/{ref}'].post;
    expect(op.operationId).toBe('testLater');
    expect(op.parameters).toEqual([
      { name: 'ref', in: 'path', required: true, schema: { type: 'string', pattern: '^DTN-[0-9A-Z]{6}$' } },
      { name: 'email', in: 'query', required: true, schema: { type: 'string', format: 'email' } },
    ]);
    expect(op.requestBody.content['application/json'].schema.properties.action).toEqual({
      type: 'string',
      enum: ['cancel'],
    });
    expect(op.security).toEqual([{ ApiKeyHeader: [] }, { BearerAuth: [] }, { XApiKey: [] }]);
    expect(Object.keys(op.responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '413',
      '415',
      '429',
      '431',
      '500',
      '503',
    ]);
    expect(op.responses['404'].description).toContain('booking_not_found');
    expect(op.responses['429'].headers['Retry-After']).toBeDefined();
    expect(d.components.securitySchemes.ApiKeyHeader).toEqual({
      type: 'apiKey',
      in: 'header',
      name: 'X-Direct-Taxi-Network-AI-Key',
    });
  });

  // found in a probe: answers the service gives that the document did not list
  it('lists the sandbox scenario header, Idempotency-Replayed, and the body and head errors a GET can get too', async () => {
    const d = await doc('/api/public/v1/openapi.json');
    for (const [path, method] of [
      ['/api/public/v1/booking', 'post'],
      ['/api/public/bookings/create', 'post'],
      ['/api/public/bookings/instant', 'post'],
      ['/api/public/v1/jobs', 'post'],
    ] as const) {
      const scenario = d.paths[path][method].parameters.find((p: { name: string }) => p.name === 'X-Test-Scenario');
      expect(scenario, path).toMatchObject({
        in: 'header',
        required: false,
        schema: { enum: expect.arrayContaining(['no_driver']) },
      });
    }
    expect(d.paths['/api/public/v1/quote'].post.responses['200'].headers['Idempotency-Replayed']).toBeDefined();
    const whoami = d.paths['/api/public/v1/whoami'].get.responses;
    expect(whoami['415'].description).toContain('unsupported_media_type');
    expect(whoami['431'].description).toContain('headers_too_large');
    expect(whoami['400'].description).toContain('invalid_input');
  });

  it('marks the key optional on public endpoints and leaves health checks out', async () => {
    const d = await doc('/api/public/openapi.json');
    expect(d.paths['/api/public/v1/whoami'].get.security[0]).toEqual({});
    expect(d.paths['/healthz']).toBeUndefined();
    expect(d.paths['/readyz']).toBeUndefined();
    expect(d.components.schemas.Error.properties.error.properties.code.anyOf).toContainEqual({
      const: 'rate_limited',
      type: 'string',
    });
  });

  it('shows the booking responses and the driver token on the driver app paths', async () => {
    const d = await doc('/api/public/openapi.json');
    const schemaOf = (path: string, method: string, status: string) =>
      d.paths[path][method].responses[status].content['application/json'].schema;
    expect(Object.keys(schemaOf('/api/public/v1/booking', 'post', '201').properties)).toEqual(
      expect.arrayContaining(['bookingReference', 'fareGBP', 'trackingUrl', 'payDriverUrl']),
    );
    expect(Object.keys(schemaOf('/api/public/bookings/create', 'post', '200').properties)).toContain(
      'booking_reference',
    );
    expect(Object.keys(schemaOf('/api/public/v1/booking/{ref}', 'get', '200').properties)).toContain('payment');
    expect(d.paths['/api/public/v1/jobs/{ref}/accept'].post.security).toContainEqual({ DriverToken: [] });
    expect(d.paths['/api/public/v1/driver/presence'].post.security).toEqual([{ DriverToken: [] }]);
    // The driver app's answers have their shapes, and public routes take a driver token too.
    expect(Object.keys(schemaOf('/api/public/v1/jobs/{ref}/accept', 'post', '200').properties)).toEqual([
      'bookingReference',
      'state',
      'deadMiles',
    ]);
    expect(schemaOf('/api/public/v1/jobs/{ref}/decline', 'post', '200').properties.state).toMatchObject({
      const: 'declined',
    });
    expect(Object.keys(schemaOf('/api/public/v1/jobs/{ref}/status', 'post', '200').properties)).toEqual([
      'bookingReference',
      'status',
    ]);
    expect(d.paths['/api/public/v1/whoami'].get.security).toContainEqual({ DriverToken: [] });
    // Partner job intake is not for drivers: not offered there.
    expect(d.paths['/api/public/v1/jobs'].post.security).not.toContainEqual({ DriverToken: [] });
    // Job intake needs a partner's key or signature (SPEC.md section 7): no anonymous `{}`.
    expect(d.paths['/api/public/v1/jobs'].post.security).toEqual([
      { ApiKeyHeader: [] },
      { BearerAuth: [] },
      { XApiKey: [] },
      { PartnerSignature: [] },
    ]);
    expect(d.components.securitySchemes.PartnerSignature).toMatchObject({ type: 'apiKey', name: 'x-signature' });
  });

  it('says which fields the booking bodies require in each spelling and shape, as the service checks them', async () => {
    const d = await doc('/api/public/openapi.json');
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    const accepts = (path: string) => {
      const schema = d.paths[path].post.requestBody.content['application/json'].schema;
      const check = ajv.compile(schema);
      return (body: Record<string, unknown>) => check(body);
    };
    const quoteId = '01930000-0000-7000-8000-000000000000';
    const instant = accepts('/api/public/bookings/instant');
    const who = { passenger_name: 'Ada', passenger_phone: '+447700900123' };
    expect(instant({ ...who, pickup_address: 'Leeds', dropoff_address: 'York' })).toBe(true);
    expect(instant({ ...who, quote_id: quoteId })).toBe(true);
    expect(instant({ ...who, quoteId })).toBe(true);
    expect(instant(who)).toBe(false);
    expect(instant({ ...who, pickup_address: 'Leeds' })).toBe(false);
    expect(instant({ passenger_name: 'Ada', quote_id: quoteId })).toBe(false);
    const create = accepts('/api/public/bookings/create');
    const paid = { quote_id: quoteId, passenger_name: 'Ada', payment_method: 'cash' };
    expect(create({ ...paid, passenger_phone_whatsapp: '+447700900123' })).toBe(true);
    expect(create({ ...paid, passenger_phone: '+447700900123' })).toBe(true);
    expect(create(paid)).toBe(false);
    for (const path of ['/api/public/v1/booking', '/api/public/v1/bookings']) {
      const v1 = accepts(path);
      const person = { passengerName: 'Ada', passengerEmail: 'ada@example.org', passengerPhone: '+447700900123' };
      const prose = { passenger_name: 'Ada', passenger_email: 'ada@example.org', passenger_phone: '+447700900123' };
      const ride = { pickup: 'Leeds', dropoff: 'York', departAt: '2030-01-01T10:00:00Z' };
      expect(v1({ ...person, ...ride })).toBe(true);
      expect(v1({ ...person, pickup: 'Leeds', dropoff: 'York', depart_at: '2030-01-01T10:00:00Z' })).toBe(true);
      expect(v1({ ...prose, quote_id: quoteId })).toBe(true);
      expect(v1({ ...person, quoteId })).toBe(true);
      expect(v1({ ...person, pickup: 'Leeds', dropoff: 'York' })).toBe(false);
      expect(v1({ ...ride, passengerName: 'Ada', passengerPhone: '+447700900123' })).toBe(false);
      expect(v1({ quoteId })).toBe(false);
    }
  });

  it("documents a partner job's fields, though each job is checked on its own", async () => {
    const d = await doc('/api/public/openapi.json');
    const body = d.paths['/api/public/v1/jobs'].post.requestBody.content['application/json'].schema;
    const [one, many] = body.anyOf;
    expect(Object.keys(one.properties)).toEqual(expect.arrayContaining(['jobRef', 'pickup', 'pickupTime', 'fare']));
    expect(one.required).toEqual(['jobRef']);
    expect(many).toMatchObject({ type: 'array', minItems: 1, maxItems: 100 });
    expect(Object.keys(many.items.anyOf[0].properties)).toContain('passengerName');
  });
});
