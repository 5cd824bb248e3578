import { Type } from '@sinclair/typebox';
import { baseUrlFor } from '../base-url.ts';
import { buildOpenApi } from '../openapi.ts';
import { defineRoute, type RouteDef } from '../route.ts';

const VERSION = '1.0.0';
const DESCRIPTION =
  'Zero-commission taxi network: fixed fares on regulated council tariffs, bookings that are never ' +
  'duplicated, dispatch to licensed local drivers. Errors are JSON `{"error": {code, message, details}, "requestId"}` ' +
  'with stable codes; text (bodies, query strings, paths) must be well-formed Unicode without NUL characters, ' +
  'else 400 `invalid_input`. Creating POSTs honour `Idempotency-Key`. Every connected domain serves the same interface.';

/**
 * The OpenAPI documents, generated on request from the live route list (so they cannot drift).
 * The v1 document lists every connected domain as a server; the unversioned one lists the
 * domain it was asked on when that is a connected domain, else the primary.
 */
export function openApiRoutes(routes: () => readonly RouteDef[]): RouteDef[] {
  const doc = Type.Object({ openapi: Type.String() }, { additionalProperties: true });
  return [
    defineRoute({
      method: 'get',
      path: '/api/public/openapi.json',
      operationId: 'getOpenApi',
      summary: 'OpenAPI 3.1 description of the public interface',
      description: 'This document, with the domain the request came to as its only server.',
      tags: ['meta'],
      auth: 'public',
      responses: { 200: { description: 'The OpenAPI document', schema: doc } },
      handler: ({ deps, req }) => {
        const servers = [baseUrlFor(req, deps.config)];
        return {
          status: 200,
          body: buildOpenApi(routes(), {
            title: `${deps.config.serviceName} API`,
            version: VERSION,
            description: DESCRIPTION,
            servers,
            apiKeyHeader: deps.config.apiKeyHeader,
          }),
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/public/v1/openapi.json',
      operationId: 'getOpenApiV1',
      summary: 'OpenAPI 3.1 description listing every connected domain as a server',
      description: 'The same document, with every connected domain (PUBLIC_BASE_URLS) as a server.',
      tags: ['meta'],
      auth: 'public',
      responses: { 200: { description: 'The OpenAPI document', schema: doc } },
      handler: ({ deps }) => ({
        status: 200,
        body: buildOpenApi(routes(), {
          title: `${deps.config.serviceName} API`,
          version: VERSION,
          description: DESCRIPTION,
          servers: deps.config.publicBaseUrls,
          apiKeyHeader: deps.config.apiKeyHeader,
        }),
      }),
    }),
  ];
}
