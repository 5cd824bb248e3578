import dns, { type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { Config } from '../config.ts';

/**
 * Server-side request forgery guard for URLs the service calls on an operator's say-so (partner
 * and supplier webhook endpoints): which addresses are public, whether an endpoint URL may be
 * registered, and a DNS `lookup` for `http(s).request` that refuses to connect anywhere else
 * (checked at connect time, so a name that later resolves to an internal address, DNS
 * rebinding, is still refused).
 *
 * Addresses are classified with node:net `BlockList`s, never by matching strings: a URL's host
 * is first normalised by the WHATWG parser (`new URL`), which turns `2130706433`, `0x7f.1`,
 * `0177.0.0.1` and `[0:0:0:0:0:ffff:7f00:1]` into `127.0.0.1` and `[::ffff:7f00:1]`.
 */

type Range = readonly [network: string, prefix: number, name: string];

/** IPv4 ranges that are not on the public internet (IANA special-purpose registry). */
const V4_RANGES: readonly Range[] = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4 relay anycast'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  // 240/4 includes the limited broadcast address 255.255.255.255.
  ['240.0.0.0', 4, 'reserved or broadcast'],
];

/**
 * IPv6 ranges that are not on the public internet. The forms that embed an IPv4 address
 * (mapped `::ffff:0:0/96`, translated `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96`, 6to4
 * `2002::/16`) are judged by that address instead (`embeddedV4`).
 */
const V6_RANGES: readonly Range[] = [
  ['::1', 128, 'loopback'],
  ['::', 128, 'unspecified'],
  // The deprecated IPv4-compatible ::a.b.c.d.
  ['::', 96, 'IPv4-compatible'],
  ['64:ff9b:1::', 48, 'local-use NAT64'],
  ['100::', 64, 'discard-only'],
  // Teredo (2001::/32), ORCHID and the other IETF protocol assignments.
  ['2001::', 23, 'IETF protocol assignments'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
];

function blockList(ranges: readonly Range[], family: 'ipv4' | 'ipv6'): Array<[BlockList, string]> {
  return ranges.map(([network, prefix, name]) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, family);
    return [list, name];
  });
}

const V4_LISTS = blockList(V4_RANGES, 'ipv4');
const V6_LISTS = blockList(V6_RANGES, 'ipv6');

/** The 16 bytes of a valid IPv6 address (with or without an embedded dotted IPv4 tail). */
function ipv6Bytes(address: string): number[] {
  let text = address;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    tail.push(...dotted[1].split('.').map(Number));
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const words =
    rest === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv6 address stands for (mapped, translated, NAT64, 6to4), if any. */
function embeddedV4(address: string): string | null {
  const b = ipv6Bytes(address);
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = (at: number) => b.slice(at, at + 4).join('.');
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated)
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12);
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12)) return v4(12);
  // 64:ff9b::a.b.c.d (well-known NAT64 prefix)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return v4(12);
  // 2002:aabb:ccdd::/48 (6to4)
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2);
  return null;
}

/** An address without the brackets of a URL host or an IPv6 zone (`fe80::1%eth0`). */
function bare(address: string): string {
  return address.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
}

/**
 * The name of the non-public range an IP address is in (`loopback`, `private`, `link-local`
 * ...), or null for a public address. Anything that is not an IP address is `not an IP address`.
 */
export function nonPublicRange(address: string): string | null {
  const ip = bare(address);
  const family = isIP(ip);
  if (family === 4) {
    for (const [list, name] of V4_LISTS) if (list.check(ip, 'ipv4')) return name;
    return null;
  }
  if (family === 6) {
    const v4 = embeddedV4(ip);
    if (v4 !== null) return nonPublicRange(v4);
    for (const [list, name] of V6_LISTS) if (list.check(ip, 'ipv6')) return name;
    return null;
  }
  return 'not an IP address';
}

/** True for an IP address on the public internet; false for any other address or text. */
export function isPublicAddress(address: string): boolean {
  return nonPublicRange(address) === null;
}

/** `localhost`, `foo.localhost` (RFC 6761: always the loopback), with or without the final dot. */
export function isLocalhostName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

// ---------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------

/** An endpoint URL that may not be registered; `problem` reads after the URL's name. */
export class EndpointUrlError extends Error {
  constructor(readonly problem: string) {
    super(`webhook URL ${problem}`);
    this.name = 'EndpointUrlError';
  }
}

export interface EndpointUrlRules {
  /** Only https (production). */
  requireHttps: boolean;
  /** Accept hosts that are loopback, private, link-local ... addresses, and localhost names. */
  allowPrivateNetworks: boolean;
}

/** The rules for this deployment: https only in production; private networks as configured. */
export function endpointUrlRules(config: Pick<Config, 'env' | 'webhooks'>): EndpointUrlRules {
  return { requireHttps: config.env === 'production', allowPrivateNetworks: config.webhooks.allowPrivateNetworks };
}

/** URLs longer than this are refused (they are stored and shown on operator pages). */
export const ENDPOINT_URL_MAX = 2048;

/**
 * Check a webhook endpoint URL before it is stored, and return it normalised (`new URL`).
 * Refused: not http(s) (only https when `requireHttps`), a user name or password in it, and
 * unless `allowPrivateNetworks` a host that is a non-public IP address in any of its forms or
 * a localhost name. A host name is not resolved here: the delivery checks the address it
 * connects to (`publicOnlyLookup`).
 */
export function checkEndpointUrl(raw: string, rules: EndpointUrlRules): string {
  if (raw.length > ENDPOINT_URL_MAX) throw new EndpointUrlError(`must be at most ${ENDPOINT_URL_MAX} characters`);
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new EndpointUrlError('must be an http or https URL');
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new EndpointUrlError('must be an http or https URL');
  if (rules.requireHttps && u.protocol !== 'https:') throw new EndpointUrlError('must use https');
  if (u.username !== '' || u.password !== '') throw new EndpointUrlError('must not contain a user name or password');
  if (!rules.allowPrivateNetworks) {
    const host = bare(u.hostname);
    if (isLocalhostName(host)) throw new EndpointUrlError(`must not point at ${host} (the loopback)`);
    if (isIP(host) !== 0) {
      const range = nonPublicRange(host);
      if (range !== null) {
        throw new EndpointUrlError(`must not point at ${host}, which is not a public address (${range})`);
      }
    }
  }
  return u.toString();
}

// ---------------------------------------------------------------------------------------
// Delivery (connect time)
// ---------------------------------------------------------------------------------------

/** A connection the guard refused: the message is what the delivery log records. */
export class AddressRefusedError extends Error {
  readonly code = 'ERR_ADDRESS_REFUSED';
  constructor(
    readonly address: string,
    readonly range: string,
  ) {
    super(`refused: ${address} is not a public address`);
    this.name = 'AddressRefusedError';
  }
}

/** Throw `AddressRefusedError` when a URL's host is a non-public IP literal (no lookup is made for those). */
export function assertPublicHost(hostname: string): void {
  const host = bare(hostname);
  if (isIP(host) === 0) return;
  const range = nonPublicRange(host);
  if (range !== null) throw new AddressRefusedError(host, range);
}

type BaseLookup = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for `http.request`/`net.connect` that resolves as usual (`dns.lookup`, or `base`
 * in tests) and keeps only public addresses; when none is left, the connection fails with
 * `AddressRefusedError` naming the first address. The socket connects to an address this
 * returned, so what was checked is what is connected to.
 */
export function publicOnlyLookup(base: BaseLookup = dns.lookup): LookupFunction {
  return (hostname, options, callback) => {
    base(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, options.all ? [] : '', undefined);
      const allowed = addresses.filter((a) => isPublicAddress(a.address));
      const first = allowed[0];
      if (!first) {
        const refused = addresses[0];
        const error = refused
          ? new AddressRefusedError(refused.address, nonPublicRange(refused.address) ?? 'unknown')
          : Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
        return callback(error, options.all ? [] : '', undefined);
      }
      if (options.all) callback(null, allowed);
      else callback(null, first.address, first.family);
    });
  };
}
