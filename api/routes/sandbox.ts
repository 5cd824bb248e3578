import { type Static, Type } from '@sinclair/typebox';
import { normaliseReference } from '../../shared/domain/reference.ts';
import { AppError } from '../../shared/errors.ts';
import { StringEnum } from '../../shared/schemas/common.ts';
import { defineRoute, type RouteDef } from '../route.ts';

/**
 * The sandbox's outbox: in test mode no SMS, WhatsApp or e-mail leaves the service. Each is
 * recorded (state `recorded`) with its full text, and a test key reads here the ones of its own
 * bookings (made with this key, or with any test key of its partner) and the passenger-verify
 * e-mails it asked for (this key, or any key of its partner; no booking), whose code and link
 * complete the sandbox's verification.
 */
const MessagesQuery = Type.Object({
  booking: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 20,
      description: "Only this booking's messages (passenger-verify e-mails, which have no booking, are left out)",
    }),
  ),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
});

const Message = Type.Object({
  id: Type.String(),
  bookingReference: Type.Union([Type.String(), Type.Null()], {
    description:
      "The booking the message is about; null for one about no booking (a passenger-verify e-mail, purpose 'verification')",
  }),
  channel: StringEnum(['email', 'sms', 'whatsapp']),
  recipient: Type.String(),
  subject: Type.Union([Type.String(), Type.Null()]),
  body: Type.String(),
  purpose: Type.String({
    description:
      'job_card, confirmation, operator_alert, cancellation, …; verification: a passenger-verify e-mail, its code and link',
  }),
  state: Type.String({ description: 'recorded: kept instead of sent (test mode); queued: not yet processed' }),
  createdAt: Type.String({ format: 'date-time' }),
});
const Messages = Type.Object({ messages: Type.Array(Message) });

interface MessageRow {
  id: string;
  reference: string | null;
  channel: 'email' | 'sms' | 'whatsapp';
  recipient: string;
  subject: string | null;
  body: string;
  purpose: string;
  state: string;
  created_at: Date;
}

const COLUMNS = ['m.id', 'm.channel', 'm.recipient', 'm.subject', 'm.body', 'm.purpose', 'm.state', 'm.created_at'];
const NEWEST_FIRST = [
  { column: 'm.created_at', order: 'desc' },
  { column: 'm.id', order: 'desc' },
] as const;

/**
 * Newest first, as each read orders its rows, to the millisecond (a message's time comes from
 * Postgres in microseconds), then by id as in SQL: the messages one transaction wrote share
 * its time, and UUIDv7 ids keep the order they were made in.
 */
const newestFirst = (a: MessageRow, b: MessageRow) =>
  b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

export function sandboxRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/public/v1/test/messages',
      operationId: 'testMessages',
      summary: 'Test mode: the SMS, WhatsApp and e-mail your test bookings and verifications would have sent',
      description:
        'Test keys only (dtn_test_…; a live key is 403). Nothing is sent in test mode: job cards to drivers, passenger confirmations and operator alerts are recorded instead, newest first, with their full text. ' +
        "So is the e-mail passenger-verify sends for a test key (purpose 'verification', bookingReference null), with its code and link: they verify the address for test-mode bookings only. " +
        "A key sees its partner's test bookings and verifications too.",
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
        const limit = query.limit ?? 100;
        const ref = query.booking ? normaliseReference(query.booking, deps.config.bookings.referencePrefix) : null;
        if (query.booking && !ref) return { status: 200, body: { messages: [] } };
        // Two reads, each by its own index (a test booking's key or partner; a message's key),
        // merged: one statement joining both ways would read every message.
        const ofBookings = deps
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
          .orderBy([...NEWEST_FIRST])
          .limit(limit)
          .select<MessageRow[]>(...COLUMNS, 'b.reference');
        // The passenger-verify e-mails asked for with this key or its partner's: only test-mode
        // messages carry a key (a live verification's never does), and none has a booking.
        const ofKeys = ref
          ? Promise.resolve([])
          : deps
              .db('outbound_messages as m')
              .join('api_keys as k', 'k.id', 'm.api_key_id')
              .where('m.test_mode', true)
              .whereNull('m.booking_id')
              .where((q) => {
                q.where('k.id', key.id);
                if (key.partnerId) q.orWhere('k.partner_id', key.partnerId);
              })
              .orderBy([...NEWEST_FIRST])
              .limit(limit)
              .select<MessageRow[]>(...COLUMNS, deps.db.raw('null as reference'));
        const [bookingRows, keyRows] = await Promise.all([ofBookings, ofKeys]);
        const rows = [...bookingRows, ...keyRows].sort(newestFirst).slice(0, limit);
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
