import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../db/knex.ts';
import { convertCouncilFile, type TariffTable, TariffTableSchema } from '../domain/tariffs/table.ts';
import { compileSchema } from '../schemas/validate.ts';

export const BUILT_IN_TARIFFS = path.join(import.meta.dirname, '..', '..', 'data', 'council-tariffs.json');

export interface StoredTable {
  id: number;
  authorityId: string;
  effectiveFrom: string;
  table: TariffTable;
}

const validateTable = compileSchema(TariffTableSchema);

/**
 * Parse an import file: either our TariffTable format (one table or an array) or the council
 * file format of data/council-tariffs.json (`{authorities: [...]}`). Throws with the problems.
 */
export function parseTariffFile(json: unknown): TariffTable[] {
  const tables =
    json !== null && typeof json === 'object' && 'authorities' in json
      ? convertCouncilFile(json)
      : Array.isArray(json)
        ? (json as unknown[])
        : [json];
  tables.forEach((t, i) => {
    const problems = validateTable(t);
    if (problems.length > 0) {
      throw new Error(`table ${i}: ${problems.map((p) => `${p.field} ${p.problem}`).join('; ')}`);
    }
  });
  return tables as TariffTable[];
}

/** Insert tables; a table already present for its authority and date is left as it is. */
export async function importTariffTables(
  db: Db,
  tables: readonly TariffTable[],
  importedBy: string,
): Promise<{ imported: StoredTable[]; unchanged: Array<{ authorityId: string; effectiveFrom: string }> }> {
  const imported: StoredTable[] = [];
  const unchanged: Array<{ authorityId: string; effectiveFrom: string }> = [];
  for (const table of tables) {
    const rows = await db('tariff_tables')
      .insert({
        authority_id: table.id,
        authority: table.authority,
        local_authority_codes: table.localAuthorityCodes,
        effective_from: table.effectiveFrom,
        table: JSON.stringify(table),
        imported_by: importedBy,
      })
      .onConflict(['authority_id', 'effective_from'])
      .ignore()
      .returning<{ id: number }[]>('id');
    if (rows[0]) imported.push({ id: rows[0].id, authorityId: table.id, effectiveFrom: table.effectiveFrom, table });
    else unchanged.push({ authorityId: table.id, effectiveFrom: table.effectiveFrom });
  }
  return { imported, unchanged };
}

/** Load the tables shipped in data/council-tariffs.json (run by migrate and start). */
export async function syncBuiltInTariffs(db: Db): Promise<number> {
  const tables = parseTariffFile(JSON.parse(fs.readFileSync(BUILT_IN_TARIFFS, 'utf8')));
  return (await importTariffTables(db, tables, 'built-in')).imported.length;
}

export interface TariffStore {
  /** Per authority, the latest table in force at `at`. */
  tablesAt(at: Date): Promise<StoredTable[]>;
}

/**
 * All tariff tables, held in memory and reloaded when older than `maxAgeMs`, so pricing costs
 * no query. An import is picked up by every pricing worker within that time.
 */
export function createTariffStore(db: Db, maxAgeMs = 30_000): TariffStore {
  let loadedAt = 0;
  let byAuthority = new Map<string, StoredTable[]>();
  let loading: Promise<void> | null = null;

  async function load(): Promise<void> {
    const rows = await db('tariff_tables')
      .orderBy([{ column: 'authority_id' }, { column: 'effective_from', order: 'desc' }])
      .select<Array<{ id: number; authority_id: string; effective_from: string; table: TariffTable }>>(
        'id',
        'authority_id',
        'effective_from',
        'table',
      );
    const next = new Map<string, StoredTable[]>();
    for (const r of rows) {
      const effectiveFrom = r.effective_from;
      const list = next.get(r.authority_id) ?? [];
      list.push({ id: r.id, authorityId: r.authority_id, effectiveFrom, table: r.table });
      next.set(r.authority_id, list);
    }
    byAuthority = next;
    loadedAt = Date.now();
  }

  return {
    async tablesAt(at) {
      if (Date.now() - loadedAt > maxAgeMs) {
        loading ??= load().finally(() => {
          loading = null;
        });
        await loading;
      }
      const day = LONDON_DAY.format(at);
      const out: StoredTable[] = [];
      for (const versions of byAuthority.values()) {
        const inForce = versions.find((v) => v.effectiveFrom <= day);
        if (inForce) out.push(inForce);
      }
      return out;
    },
  };
}

/** The calendar day in Europe/London as YYYY-MM-DD (tables take effect on a local day). */
const LONDON_DAY = new Intl.DateTimeFormat('en-CA', {
  timeZone: 'Europe/London',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
});
