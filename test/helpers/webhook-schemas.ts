import { compileSchema, type Findings } from '../../shared/schemas/validate.ts';

/**
 * A webhook event's schema as the served OpenAPI document's `webhooks` gives it (not the
 * source's TypeBox): checking delivered events against it checks the document integrators read.
 */
export async function webhookEventChecker(
  baseUrl: string,
  name: 'bookingStatus' | 'bookingAmended',
): Promise<(event: unknown) => Findings> {
  const doc = (await (await fetch(`${baseUrl}/api/public/v1/openapi.json`)).json()) as {
    webhooks: Record<string, { post: { requestBody: { content: Record<string, { schema: object }> } } }>;
  };
  const schema = doc.webhooks[name]?.post.requestBody.content['application/json']?.schema;
  if (!schema) throw new Error(`the OpenAPI document has no webhook ${name}`);
  return compileSchema(schema as never);
}
