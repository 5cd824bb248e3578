import { type Static, Type } from '@sinclair/typebox';
import { normaliseReference } from '../../shared/domain/reference.ts';
import { AppError } from '../../shared/errors.ts';
import { StringEnum } from '../../shared/schemas/common.ts';
import { defineRoute, type RouteDef } from '../route.ts';

/**
 * The sandbox's outbox: in test mode no SMS, WhatsApp or e-mail leaves the service. Each is
 * recorded (state `recorded`) with its full text, and a test key reads the ones of its own
 * bookings (made with this key, or with any test key of its partner) here.
 */
const MessagesQuery = Type.Object({
  booking: Type.Optional(Type.String({ minLength: 1, maxLength: 20, description: 'Only this booking reference' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
});

const Message = Type.Object({
  id: Type.String(),
  bookingReference: Type.Union([Type.String(), Type.Null()]),
  channel: StringEnum(['email', 'sms', 'whatsapp']),
  recipient: Type.String(),
  subject: Type.Union([Type.String(), Type.Null()]),
  body: Type.String(),
  purpose: Type.String({ description: 'job_card, confirmation, operator_alert, cancellation, …' }),
  state: Type.String({ description: 'recorded: kept instead of sent (test mode); queued: not yet processed' }),
  createdAt: Type.String({ format: 'date-time' }),
});
const Messages = Type.Object({ messages: Type.Array(Message) });

export function sandboxRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/public/v1/test/messages',
      operationId: 'testMessages',
      summary: 'Test mode: the SMS, WhatsApp and e-mail your test bookings would have sent',
      description:
        'Test keys only (dtn_test_…; a live key is 403). Nothing is sent in test mode: job cards to drivers, passenger confirmations and operator alerts are recorded instead, newest first, with their full text.',
      tags: ['sandbox'],
      auth: 'key',
      query: MessagesQuery,
      errors: ['forbidden'],
      responses: { 200: { description: 'Recorded messages', schema: Messages } },
      handler: async ({ deps, caller, query }) => {
        if (caller.kind !== 'api_key' || caller.key.mode !== 'test') {
          throw new AppError('forbidden', 'Recorded test messages are for test-mode keys (dtn_test_…).');
        }
        const key = caller.key;
        const ref = query.booking ? normaliseReference(query.booking, deps.config.bookings.referencePrefix) : null;
        if (query.booking && !ref) return { status: 200, body: { messages: [] } };
        const rows = await deps
          .db('outbound_messages as m')
          .join('bookings as b', 'b.id', 'm.booking_id')
          .where('m.test_mode', true)
          .where('b.test_mode', true)
          .where((q) => {
            q.where('b.api_key_id', key.id);
            if (key.partnerId) q.orWhere('b.partner_id', key.partnerId);
          })
          .modify((q) => {
            if (ref) q.where('b.reference', ref);
          })
          .orderBy([
            { column: 'm.created_at', order: 'desc' },
            { column: 'm.id', order: 'desc' },
          ])
          .limit(query.limit ?? 100)
          .select<
            Array<{
              id: string;
              reference: string;
              channel: 'email' | 'sms' | 'whatsapp';
              recipient: string;
              subject: string | null;
              body: string;
              purpose: string;
              state: string;
              created_at: Date;
            }>
          >(
            'm.id',
            'b.reference',
            'm.channel',
            'm.recipient',
            'm.subject',
            'm.body',
            'm.purpose',
            'm.state',
            'm.created_at',
          );
        const messages = rows.map((r) => ({
          id: r.id,
          bookingReference: r.reference,
          channel: r.channel,
          recipient: r.recipient,
          subject: r.subject,
          body: r.body,
          purpose: r.purpose,
          state: r.state,
          createdAt: r.created_at.toISOString(),
        }));
        return { status: 200, body: { messages } satisfies Static<typeof Messages> };
      },
    }),
  ];
}
