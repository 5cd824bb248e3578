import { createHash } from 'node:crypto';
import { gzip, gzipSync } from 'node:zlib';
import type { Request, Response } from 'express';

/**
 * Static assets of the website (its small scripts, and Swagger UI's files from node_modules),
 * served from our own origin: held in memory, gzipped once, with a strong ETag. Their paths
 * carry a content hash (or the package version), so browsers keep them for a year without
 * asking again: a slow phone downloads each once.
 */
export interface Asset {
  body: Buffer;
  gzipped: Buffer | null;
  contentType: string;
  /** Subresource Integrity value (`sha256-…`), also the CSP hash source of a script. */
  integrity: string;
  /** The first 10 hex digits of the SHA-256, for versioned paths. */
  version: string;
  etag: string;
}

export function makeAsset(content: string | Buffer, contentType: string): Asset {
  const body = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  return assetOf(body, body.length > 1024 ? gzipSync(body, { level: 9 }) : null, contentType);
}

/** The same for a large file (Swagger UI's bundle): compressed off the event loop. */
export async function makeLargeAsset(body: Buffer, contentType: string): Promise<Asset> {
  const zipped = await new Promise<Buffer>((resolve, reject) =>
    gzip(body, { level: 9 }, (err, out) => (err ? reject(err) : resolve(out))),
  );
  return assetOf(body, zipped, contentType);
}

function assetOf(body: Buffer, zipped: Buffer | null, contentType: string): Asset {
  const digest = createHash('sha256').update(body).digest();
  return {
    body,
    gzipped: zipped && zipped.length < body.length ? zipped : null,
    contentType,
    integrity: `sha256-${digest.toString('base64')}`,
    version: digest.toString('hex').slice(0, 10),
    etag: `"${digest.toString('base64url').slice(0, 27)}"`,
  };
}

export const JS = 'text/javascript; charset=utf-8';
export const CSS = 'text/css; charset=utf-8';

/** Answer an asset: 304 for a matching If-None-Match, gzip when accepted, cached for a year when its path is versioned. */
export function sendAsset(req: Request, res: Response, asset: Asset, opts: { immutable: boolean }): void {
  res.setHeader('Content-Type', asset.contentType);
  res.setHeader('Cache-Control', opts.immutable ? 'public, max-age=31536000, immutable' : 'public, max-age=300');
  res.setHeader('ETag', asset.etag);
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  if (req.get('if-none-match') === asset.etag) {
    res.status(304).end();
    return;
  }
  const gzip = asset.gzipped !== null && /\bgzip\b/.test(req.get('accept-encoding') ?? '');
  const body = gzip ? (asset.gzipped as Buffer) : asset.body;
  if (gzip) res.setHeader('Content-Encoding', 'gzip');
  res.setHeader('Content-Length', String(body.length));
  res.status(200);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  res.end(body);
}
