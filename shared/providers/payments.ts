/**
 * Charging weekly invoices (SPEC.md 2.10: "a weekly invoice is generated and charged").
 * Fares never pass through us; only the flat fee and pass-through costs are charged, by a
 * payment provider behind this interface. A provider answers for each invoice: charged
 * (`paid`), accepted for later collection (`due`), or an error, after which the invoice is
 * `charge_failed` and the billing worker tries again with backoff.
 */
export interface InvoiceCharge {
  invoiceId: string;
  owner: { kind: 'driver' | 'partner'; id: string };
  week: string;
  totalPence: number;
}

export type ChargeOutcome = { invoiceId: string; state: 'paid' | 'due' } | { invoiceId: string; error: string };

export interface PaymentProvider {
  readonly name: string;
  /**
   * Charge a batch of invoices; one outcome per invoice (a missing outcome counts as an error).
   * The invoice id is the idempotency key a charging provider must pass on (a card provider's
   * Idempotency-Key): `chargeInvoices` holds the invoices' row locks during this call and records
   * the outcomes in the same transaction, so a crash after the provider charged and before that
   * commit leaves the invoices `issued`, and the next run asks again for the same invoice ids.
   */
  charge(charges: readonly InvoiceCharge[]): Promise<ChargeOutcome[]>;
}

/**
 * The built-in provider collects nothing itself: it records each invoice as `due`, for finance
 * to reconcile against what drivers pay by bank transfer or standing order. A card or direct
 * debit provider replaces it by implementing `charge`.
 */
export function builtinPaymentProvider(): PaymentProvider {
  return {
    name: 'builtin',
    async charge(charges) {
      return charges.map((c) => ({ invoiceId: c.invoiceId, state: 'due' as const }));
    },
  };
}
