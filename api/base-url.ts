import type { Request } from 'express';
import type { Config } from '../shared/config.ts';

/**
 * The connected domain a request came to (so links point back where the caller is), when it
 * is one of PUBLIC_BASE_URLS; otherwise the primary domain. Never an arbitrary Host header.
 */
export function baseUrlFor(req: Request, config: Pick<Config, 'publicBaseUrls'>): string {
  const here = `${req.protocol}://${req.get('host') ?? ''}`.toLowerCase();
  return config.publicBaseUrls.find((u) => u.toLowerCase() === here) ?? (config.publicBaseUrls[0] as string);
}
