import { type Static, Type } from '@sinclair/typebox';

/**
 * POST /api/public/v1/passenger-verify (CONTRACT.md section 5). The address is checked by the
 * service, not by a schema `format`, so a malformed address is answered 400
 * `email_not_accepted` with problem `malformed`, as the contract says.
 */
export const PassengerVerifyRequest = Type.Object({
  email: Type.String({
    minLength: 1,
    maxLength: 1000,
    description:
      "The passenger's own e-mail address. Disposable, role (info@, bookings@, ...) and malformed addresses, and domains without a mail server, are refused with email_not_accepted",
  }),
  code: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 32,
      description:
        'The 6-digit code from the verification e-mail. Without it, a verification e-mail is sent (unless the address is already verified)',
    }),
  ),
});
export type PassengerVerifyRequest = Static<typeof PassengerVerifyRequest>;

const Email = Type.String({ description: 'The address as stored: trimmed and lower-case' });

/** `{email}`: the address is accepted; a code and a link were e-mailed unless it is already verified. */
export const PassengerVerifyStarted = Type.Object({
  email: Email,
  accepted: Type.Literal(true),
  verified: Type.Boolean({ description: 'true when the address was verified before' }),
  verificationSent: Type.Boolean({
    description: 'true when a code and a link were e-mailed (valid 30 minutes, 5 code attempts)',
  }),
});
export type PassengerVerifyStarted = Static<typeof PassengerVerifyStarted>;

/** `{email, code}`, or the link: the address is verified. */
export const PassengerVerified = Type.Object({
  email: Email,
  verified: Type.Literal(true),
});
export type PassengerVerified = Static<typeof PassengerVerified>;

export const PassengerVerifyResponse = Type.Union([PassengerVerifyStarted, PassengerVerified]);

export const PassengerVerifyLinkQuery = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 128, description: 'The token of the link in the e-mail' }),
});
export type PassengerVerifyLinkQuery = Static<typeof PassengerVerifyLinkQuery>;
