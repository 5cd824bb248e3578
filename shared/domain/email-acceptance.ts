import { Resolver } from 'node:dns/promises';
import { domainToASCII, domainToUnicode } from 'node:url';
import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';

/**
 * Which passenger e-mail addresses we accept (CONTRACT.md section 5, SPEC.md 2.7): a genuine,
 * reachable, personal address. Checked in order, cheapest first:
 *
 * 1. `malformed`: outside a practical subset of RFC 5322 addr-spec (below).
 * 2. `disposable`: the domain, or a parent of it, is on the disposable-email-domains list.
 * 3. `role_address`: the local part names a function, not a person (`ROLE_LOCAL_PARTS`).
 * 4. `no_mail_server`: DNS says the domain takes no mail (mode `strict` or `soft`, below).
 *
 * Everything but the last is pure. The DNS lookup is injectable, and mode `off` never looks up.
 */

export type EmailProblem = 'malformed' | 'disposable' | 'role_address' | 'no_mail_server';

export type EmailCheck = { accepted: true; email: string } | { accepted: false; email: string; problem: EmailProblem };

/**
 * - `strict`: accept only when DNS positively shows a mail server: an MX record, or, with no
 *   MX, an A or AAAA record (the implicit MX of RFC 5321 section 5.1). A DNS failure or
 *   timeout is a rejection.
 * - `soft` (the default): reject only on a definite answer that there is no mail server
 *   (NXDOMAIN, no MX and no A/AAAA, or a null MX per RFC 7505); a DNS failure or timeout is
 *   not a rejection.
 * - `off`: no DNS lookup.
 */
export type MxMode = 'strict' | 'soft' | 'off';
export const MX_MODES = ['strict', 'soft', 'off'] as const satisfies readonly MxMode[];

/**
 * The mail-server check a request gets: none in test mode, whose messages are recorded and
 * never sent (so sandbox addresses such as @example.com, and machines without DNS, work),
 * else the configured mode. The other rules (malformed, disposable, role) apply in both.
 */
export function mxCheckFor(mode: MxMode, testMode: boolean): MxMode {
  return testMode ? 'off' : mode;
}

export type ResolveMx = (domain: string) => Promise<Array<{ exchange: string; priority?: number }>>;
/** A and AAAA addresses of a host; rejects like node:dns does (`ENODATA`, `ENOTFOUND`, ...). */
export type ResolveAddresses = (domain: string) => Promise<string[]>;

export interface CheckEmailOptions {
  mx: MxMode;
  /** Default: node:dns/promises `resolveMx` on a resolver with a short timeout. */
  resolveMx?: ResolveMx;
  /**
   * The A/AAAA fallback when a domain has no MX. Default: node:dns `resolve4` + `resolve6`,
   * unless `resolveMx` was injected, in which case there is no fallback lookup (the domain
   * counts as having no address records), so an injected resolver never leads to real DNS.
   */
  resolveAddresses?: ResolveAddresses;
  /** Bound on the whole DNS check; past it the answer is "DNS failed". Default 3000 ms. */
  timeoutMs?: number;
  /** The DNS servers node:dns asks (`ip` or `ip:port`); default the system's. */
  dnsServers?: readonly string[];
}

/**
 * The options of a passenger e-mail check as configured: the mode (`EMAIL_MX_CHECK`; off in
 * test mode, `mxCheckFor`) and the DNS servers (`EMAIL_DNS_SERVERS`).
 */
export function configuredCheck(
  bookings: { emailMxCheck: MxMode; emailDnsServers: readonly string[] },
  testMode = false,
): CheckEmailOptions {
  return {
    mx: mxCheckFor(bookings.emailMxCheck, testMode),
    ...(bookings.emailDnsServers.length > 0 ? { dnsServers: bookings.emailDnsServers } : {}),
  };
}

/**
 * The form we store and compare addresses in (the canonical form): trimmed and lower-cased,
 * with an internationalised domain in the one spelling IDNA gives it,
 * `domainToUnicode(domainToASCII(domain))`. So the spelling the checks below see (the ASCII
 * form) and the one stored, blocked, rate-limited and verified are the same address:
 * full-width letters are folded and soft hyphens dropped (`bad@ｇmail.com` and `bad@gm\u00ADail.com`
 * are `bad@gmail.com`), and the punycode spelling reads as the domain
 * (`ada@xn--mnchen-3ya.de` is `ada@münchen.de`). A plain ASCII domain (no `xn--` label) is only
 * lower-cased; one IDNA refuses, or with spaces or control characters, is left as typed (and is
 * malformed). Idempotent: the canonical form of a canonical form is itself.
 */
export function normaliseEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  const at = email.indexOf('@');
  if (at <= 0 || at !== email.lastIndexOf('@')) return email;
  const domain = email.slice(at + 1);
  if (/^[\x21-\x7e]*$/.test(domain) && !/(^|\.)xn--/.test(domain)) return email;
  if (/[\s\p{Cc}]/u.test(domain)) return email;
  const ascii = domainToASCII(domain);
  const canonical = ascii ? domainToUnicode(ascii) : '';
  return canonical ? `${email.slice(0, at)}@${canonical}` : email;
}

/** Google's two spellings of one mailbox domain, in which dots in the local part do not count. */
const GMAIL_DOMAINS: ReadonlySet<string> = new Set(['gmail.com', 'googlemail.com']);

/**
 * The mailbox an address delivers to, as operators' blocks (and the unconfirmed-address limit)
 * see it: the canonical form (`normaliseEmail`) without a sub-address tag (`+tag`, for every
 * domain; a local part that starts with `+` keeps it), and, at gmail.com and googlemail.com,
 * without dots in the local part and with googlemail.com as gmail.com. So `B.ad+x@GoogleMail.com`
 * is `bad@gmail.com`. Not what is stored as the passenger's address, nor what verification
 * confirms: those are the address as typed, in canonical form. Idempotent.
 */
export function mailboxKey(raw: string): string {
  const email = normaliseEmail(raw);
  const at = email.lastIndexOf('@');
  if (at <= 0) return email;
  let local = email.slice(0, at);
  let domain = email.slice(at + 1);
  const plus = local.indexOf('+');
  if (plus > 0) local = local.slice(0, plus);
  if (GMAIL_DOMAINS.has(domain)) {
    local = local.replace(/\./g, '');
    domain = 'gmail.com';
  }
  return `${local}@${domain}`;
}

// ---------------------------------------------------------------------------------------------
// 1. Syntax: a practical subset of RFC 5322 addr-spec (with the RFC 5321 length limits).
//    - exactly one `@`; the whole address at most 254 characters;
//    - local part: 1 to 64 characters, a dot-atom (letters, digits and ! # $ % & ' * + / = ? ^ _
//      ` { | } ~ -, in runs separated by single dots, not starting or ending with a dot). Quoted
//      local parts, comments and non-ASCII local parts are not accepted: real mailboxes that
//      need them are vanishingly rare and many mail systems refuse them;
//    - domain: a host name (not an IP literal) of at least two labels, at most 253 characters
//      in its ASCII form; labels of 1 to 63 letters, digits and hyphens, not starting or ending
//      with a hyphen; the top-level label alphabetic (or an IDN `xn--` label). Internationalised
//      domains are accepted and checked in their punycode form; the address is stored with the
//      domain in its canonical Unicode form (`normaliseEmail`).
// ---------------------------------------------------------------------------------------------

const LOCAL_PART = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const TOP_LABEL = /^([a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

interface Parts {
  local: string;
  /** ASCII (punycode) form of the domain. */
  domain: string;
}

function parse(email: string): Parts | null {
  if (email.length === 0 || email.length > 254) return null;
  const at = email.indexOf('@');
  if (at <= 0 || at !== email.lastIndexOf('@')) return null;
  const local = email.slice(0, at);
  const rawDomain = email.slice(at + 1);
  if (local.length > 64 || !LOCAL_PART.test(local)) return null;
  // Reject what domainToASCII would silently repair or drop (spaces, controls, a trailing dot).
  if (rawDomain.length === 0 || /[\s\p{Cc}]/u.test(rawDomain) || rawDomain.endsWith('.')) return null;
  const domain = /^[\x21-\x7e]+$/.test(rawDomain) ? rawDomain : domainToASCII(rawDomain);
  if (domain.length === 0 || domain.length > 253) return null;
  const labels = domain.split('.');
  if (labels.length < 2) return null;
  if (!labels.every((l) => LABEL.test(l))) return null;
  if (!TOP_LABEL.test(labels[labels.length - 1] as string)) return null;
  return { local, domain };
}

/** Whether an address is well-formed by the rules above (after normalisation). */
export function isWellFormedEmail(raw: string): boolean {
  return parse(normaliseEmail(raw)) !== null;
}

// ---------------------------------------------------------------------------------------------
// 2. Disposable domains: the disposable-email-domains list (npm disposable-email-domains-js),
//    loaded once into a Set on first use. A subdomain of a listed domain is disposable too
//    (`x.mailinator.com`); the bare top-level label is never looked up.
// ---------------------------------------------------------------------------------------------

let disposable: Set<string> | null = null;

export function isDisposableDomain(domain: string): boolean {
  disposable ??= disposableEmailBlocklistSet();
  const labels = domain.toLowerCase().split('.');
  for (let i = 0; i < labels.length - 1; i++) {
    if (disposable.has(labels.slice(i).join('.'))) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// 3. Role addresses: local parts that name a function or a shared mailbox rather than a
//    person. A passenger's confirmation and driver contact must reach the passenger, and role
//    mailboxes are typically shared, unattended or automated. Compared after dropping a plus
//    tag (`info+taxi@`) and the separators `.`, `_` and `-` (so `no-reply`, `no_reply`,
//    `no.reply` and `noreply` are all the same role).
// ---------------------------------------------------------------------------------------------

export const ROLE_LOCAL_PARTS: readonly string[] = [
  // general enquiries and front desks
  'info',
  'information',
  'contact',
  'contactus',
  'enquiries',
  'enquiry',
  'inquiries',
  'inquiry',
  'hello',
  'office',
  'reception',
  'general',
  'mail',
  'email',
  'team',
  'staff',
  'all',
  'everyone',
  // bookings and sales
  'booking',
  'bookings',
  'reservations',
  'reservation',
  'sales',
  'orders',
  'order',
  'shop',
  'store',
  // support and service
  'support',
  'help',
  'helpdesk',
  'service',
  'services',
  'customerservice',
  'customerservices',
  'customercare',
  'feedback',
  'complaints',
  // money
  'billing',
  'accounts',
  'accountspayable',
  'accounting',
  'finance',
  'invoices',
  'invoice',
  'payments',
  'payroll',
  // people and press
  'hr',
  'jobs',
  'careers',
  'recruitment',
  'marketing',
  'media',
  'press',
  'news',
  'newsletter',
  // legal and privacy
  'legal',
  'compliance',
  'privacy',
  'gdpr',
  'dpo',
  // technical and automated (RFC 2142 and common practice)
  'admin',
  'administrator',
  'postmaster',
  'hostmaster',
  'webmaster',
  'abuse',
  'security',
  'noc',
  'root',
  'sysadmin',
  'devnull',
  'noreply',
  'donotreply',
  'mailerdaemon',
  'bounce',
  'bounces',
  'notifications',
  'alerts',
];

function roleKey(local: string): string {
  const plus = local.indexOf('+');
  return (plus === -1 ? local : local.slice(0, plus)).replace(/[._-]/g, '');
}

const ROLE_SET = new Set(ROLE_LOCAL_PARTS.map(roleKey));

export function isRoleLocalPart(local: string): boolean {
  return ROLE_SET.has(roleKey(local.toLowerCase()));
}

// ---------------------------------------------------------------------------------------------
// 4. Mail server (MX, with the A/AAAA fallback of RFC 5321 section 5.1).
// ---------------------------------------------------------------------------------------------

/** `yes`: a mail server exists. `no`: DNS definitely says none. `unknown`: DNS failed or timed out. */
export type MailServerVerdict = 'yes' | 'no' | 'unknown';

const DEFAULT_TIMEOUT_MS = 3000;
/** One resolver per list of servers ('' is the system's), each with a short timeout. */
const resolvers = new Map<string, Resolver>();

function resolver(servers: readonly string[] = []): Resolver {
  const key = servers.join(',');
  let r = resolvers.get(key);
  if (!r) {
    r = new Resolver({ timeout: 1000, tries: 2 });
    if (servers.length > 0) r.setServers([...servers]);
    resolvers.set(key, r);
  }
  return r;
}

function codeOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/** NXDOMAIN: the domain does not exist. */
function isNxDomain(err: unknown): boolean {
  return codeOf(err) === 'ENOTFOUND';
}

/** The domain exists but has no records of the asked type. */
function isNoRecords(err: unknown): boolean {
  return codeOf(err) === 'ENODATA';
}

const dnsResolveMx =
  (servers?: readonly string[]): ResolveMx =>
  (domain) =>
    resolver(servers).resolveMx(domain);

const dnsResolveAddresses =
  (servers?: readonly string[]): ResolveAddresses =>
  async (domain) => {
    const r = resolver(servers);
    const [v4, v6] = await Promise.allSettled([r.resolve4(domain), r.resolve6(domain)]);
    const found = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (found.length > 0) return found;
    // Neither has records: a definite "none" only if both said so; otherwise the first failure.
    const errors: unknown[] = [v4, v6].map((x) => (x.status === 'rejected' ? x.reason : null));
    const indefinite = errors.find((e) => e !== null && !isNoRecords(e) && !isNxDomain(e));
    if (indefinite) throw indefinite;
    return [];
  };

/** RFC 7505 null MX: a single record with an empty (root) exchange says "no mail here". */
function isNullMx(records: Array<{ exchange: string }>): boolean {
  return records.length > 0 && records.every((r) => r.exchange === '' || r.exchange === '.');
}

async function lookUpMailServer(
  domain: string,
  resolveMx: ResolveMx,
  resolveAddresses: ResolveAddresses | null,
): Promise<MailServerVerdict> {
  let records: Array<{ exchange: string }>;
  try {
    records = await resolveMx(domain);
  } catch (err) {
    if (isNxDomain(err)) return 'no';
    if (!isNoRecords(err)) return 'unknown';
    records = [];
  }
  if (records.length > 0) return isNullMx(records) ? 'no' : 'yes';
  if (!resolveAddresses) return 'no';
  try {
    return (await resolveAddresses(domain)).length > 0 ? 'yes' : 'no';
  } catch (err) {
    return isNxDomain(err) || isNoRecords(err) ? 'no' : 'unknown';
  }
}

/** Whether `domain` (ASCII form) has a mail server, bounded by a timeout (`unknown` past it). */
export async function mailServerVerdict(
  domain: string,
  opts: Omit<CheckEmailOptions, 'mx'> = {},
): Promise<MailServerVerdict> {
  const resolveMx = opts.resolveMx ?? dnsResolveMx(opts.dnsServers);
  const resolveAddresses = opts.resolveAddresses ?? (opts.resolveMx ? null : dnsResolveAddresses(opts.dnsServers));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<MailServerVerdict>((resolve) => {
    timer = setTimeout(() => resolve('unknown'), opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  });
  try {
    const lookup = lookUpMailServer(domain, resolveMx, resolveAddresses).catch(() => 'unknown' as const);
    return await Promise.race([lookup, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Decide whether to accept an address as a passenger's e-mail. The returned `email` is the
 * canonical form (`normaliseEmail`), the same address the checks ran on; it is what is stored
 * and compared.
 */
export async function checkEmail(raw: string, opts: CheckEmailOptions): Promise<EmailCheck> {
  const email = normaliseEmail(raw);
  const parts = parse(email);
  if (!parts) return { accepted: false, email, problem: 'malformed' };
  if (isDisposableDomain(parts.domain)) return { accepted: false, email, problem: 'disposable' };
  if (isRoleLocalPart(parts.local)) return { accepted: false, email, problem: 'role_address' };
  if (opts.mx !== 'off') {
    const verdict = await mailServerVerdict(parts.domain, opts);
    if (verdict === 'no' || (verdict === 'unknown' && opts.mx === 'strict')) {
      return { accepted: false, email, problem: 'no_mail_server' };
    }
  }
  return { accepted: true, email };
}

/** A sentence for each problem, for error messages. */
export const EMAIL_PROBLEM_MESSAGES: Record<EmailProblem, string> = {
  malformed: 'This is not a valid e-mail address.',
  disposable: 'Disposable e-mail addresses are not accepted; use a personal address that you keep.',
  role_address:
    'Shared or role addresses (such as info@ or bookings@) are not accepted; use the passenger’s own address.',
  no_mail_server: 'No mail server was found for the domain of this e-mail address; check the spelling.',
};
