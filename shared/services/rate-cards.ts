import type { Db } from '../db/knex.ts';
import type { RateCard } from '../domain/tariffs/types.ts';
import { uuidv7 } from '../ids.ts';

/**
 * Approved rate cards (SPEC.md 2.1): a driver's or a partner's own prices (per mile, a minimum,
 * an optional flag fall, fixed prices between places) that replace the council tariff for
 * quotes made through that driver (their token) or partner (their key). One card per owner;
 * setting it from the operator CLI is the approval. Cards are data, so the pricing worker reads
 * them per quote and a change applies to the next quote.
 */
export type RateCardOwner = { driverId: string } | { partnerId: string };

export interface RateCardInput {
  perMilePence: number;
  minimumPence: number;
  flagFallPence?: number;
  fixedRoutes?: RateCard['fixedRoutes'];
}

export class RateCardOwnerNotFound extends Error {}

/** Create or replace an owner's card, approved by `actor`; null when the owner is unknown. */
export async function setRateCard(
  db: Db,
  owner: RateCardOwner,
  input: RateCardInput,
  actor: string,
): Promise<{ id: string; card: RateCard; approvedAt: string }> {
  return db.transaction(async (trx) => {
    const isDriver = 'driverId' in owner;
    const ownerId = isDriver ? owner.driverId : owner.partnerId;
    const named = await trx(isDriver ? 'drivers' : 'partners')
      .where({ id: ownerId })
      .first<{ name: string } | undefined>('name');
    if (!named) throw new RateCardOwnerNotFound(`no ${isDriver ? 'driver' : 'partner'} ${ownerId}`);
    const now = new Date();
    const card: RateCard = {
      kind: isDriver ? 'driver_override' : 'partner_rate',
      owner: named.name,
      asOf: now.toISOString().slice(0, 10),
      perMilePence: input.perMilePence,
      minimumPence: input.minimumPence,
      ...(input.flagFallPence ? { flagFallPence: input.flagFallPence } : {}),
      ...(input.fixedRoutes?.length ? { fixedRoutes: input.fixedRoutes } : {}),
    };
    const column = isDriver ? 'driver_id' : 'partner_id';
    const [row] = await trx('rate_cards')
      .insert({
        id: uuidv7(),
        [column]: ownerId,
        card: JSON.stringify(card),
        approved_at: now,
        approved_by: actor,
        created_at: now,
        updated_at: now,
      })
      .onConflict(trx.raw(`(${column}) where ${column} is not null`))
      .merge({ card: JSON.stringify(card), approved_at: now, approved_by: actor, updated_at: now })
      .returning<Array<{ id: string }>>('id');
    if (!row) throw new Error('rate card upsert returned no row');
    await trx('audit_log').insert({
      actor,
      action: 'rate_card.set',
      subject_type: isDriver ? 'driver' : 'partner',
      subject_id: ownerId,
      details: JSON.stringify(card),
    });
    return { id: row.id, card, approvedAt: now.toISOString() };
  });
}

/** Withdraw an owner's card: their quotes go back to the council tariff. False when there was none. */
export async function removeRateCard(db: Db, owner: RateCardOwner, actor: string): Promise<boolean> {
  const isDriver = 'driverId' in owner;
  const ownerId = isDriver ? owner.driverId : owner.partnerId;
  return db.transaction(async (trx) => {
    // Quotes keep pointing at the card they were priced on; an unapproved card is never used.
    const n = await trx('rate_cards')
      .where(isDriver ? 'driver_id' : 'partner_id', ownerId)
      .whereNotNull('approved_at')
      .update({ approved_at: null, approved_by: null, updated_at: trx.fn.now() });
    if (n > 0) {
      await trx('audit_log').insert({
        actor,
        action: 'rate_card.remove',
        subject_type: isDriver ? 'driver' : 'partner',
        subject_id: ownerId,
      });
    }
    return n > 0;
  });
}
