import { createDb } from '../shared/db/knex.ts';
import { configOrExit } from '../shared/lifecycle.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';

/** `tsx bin/migrate.ts latest|rollback|rollback-all|status` (the Procfile's release phase runs latest). */
const command = process.argv[2] ?? 'latest';
const config = await configOrExit();
const db = createDb(config, { appName: 'dtn-migrate', poolMax: 2 });
try {
  if (config.databaseSchema !== 'public') await db.raw('create schema if not exists ??', [config.databaseSchema]);
  switch (command) {
    case 'latest': {
      const [, applied] = (await db.migrate.latest()) as [number, string[]];
      // Council tariffs shipped with this build (data/council-tariffs.json); tables already
      // present for their authority and date are left alone.
      const tariffsAdded = await syncBuiltInTariffs(db);
      process.stdout.write(`${JSON.stringify({ applied, tariffsAdded })}\n`);
      break;
    }
    case 'rollback':
    case 'rollback-all': {
      const [, reverted] = (await db.migrate.rollback(undefined, command === 'rollback-all')) as [number, string[]];
      process.stdout.write(`${JSON.stringify({ reverted })}\n`);
      break;
    }
    case 'status': {
      const [done, pending] = (await db.migrate.list()) as [Array<{ name: string }>, string[]];
      process.stdout.write(`${JSON.stringify({ completed: done.map((m) => m.name), pending })}\n`);
      break;
    }
    default:
      process.stderr.write(`unknown command ${command}: latest, rollback, rollback-all or status\n`);
      process.exitCode = 2;
  }
} catch (err) {
  process.stderr.write(`migration failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await db.destroy();
}
