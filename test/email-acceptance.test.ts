import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';
import { describe, expect, it, vi } from 'vitest';
import {
  type CheckEmailOptions,
  checkEmail,
  isDisposableDomain,
  isRoleLocalPart,
  isWellFormedEmail,
  mailboxKey,
  normaliseEmail,
  type ResolveAddresses,
  type ResolveMx,
  ROLE_LOCAL_PARTS,
} from '../shared/domain/email-acceptance.ts';

/**
 * The acceptance rules for passenger e-mail addresses (CONTRACT.md section 5), with DNS
 * injected: no test here makes a real lookup.
 */
const off: CheckEmailOptions = { mx: 'off' };

function dnsError(code: string): Error {
  return Object.assign(new Error(`query ${code}`), { code });
}

const mxOk: ResolveMx = async () => [{ exchange: 'mx1.example.net', priority: 10 }];
const mxFails =
  (code: string): ResolveMx =>
  async () => {
    throw dnsError(code);
  };
const addresses =
  (list: string[]): ResolveAddresses =>
  async () =>
    list;
const addressesFail =
  (code: string): ResolveAddresses =>
  async () => {
    throw dnsError(code);
  };
const never: ResolveMx = () => new Promise(() => {});

describe('normaliseEmail', () => {
  it('trims and lower-cases', () => {
    expect(normaliseEmail('  Ada.Lovelace@Example.COM \n')).toBe('ada.lovelace@example.com');
  });

  it('gives an internationalised domain its one canonical spelling, readable and the one the checks see', () => {
    const canonical: Array<[string, string]> = [
      ['bad@ｇmail.com', 'bad@gmail.com'], // full-width g
      ['bad@ＧＭＡＩＬ．ＣＯＭ', 'bad@gmail.com'], // full-width letters and full stop
      ['bad@gm\u00ADail.com', 'bad@gmail.com'], // soft hyphen
      ['bad@gmail\u3002com', 'bad@gmail.com'], // ideographic full stop
      ['Anna@MÜNCHEN.de', 'anna@münchen.de'],
      ['anna@xn--mnchen-3ya.de', 'anna@münchen.de'], // punycode reads as the domain
      ['anna@XN--MNCHEN-3YA.DE', 'anna@münchen.de'],
      ['ada@example.xn--p1ai', 'ada@example.рф'],
      ['ada@straße.de', 'ada@straße.de'],
      ['ada.lovelace+taxi@example.com', 'ada.lovelace+taxi@example.com'], // tags and dots are kept
    ];
    for (const [raw, email] of canonical) {
      expect(normaliseEmail(raw), raw).toBe(email);
      expect(normaliseEmail(email), `${raw} is stable`).toBe(email);
    }
  });

  it('leaves what it cannot read as typed, for the rules to refuse', () => {
    for (const raw of ['ada@exam ple.com', 'a@b@c.com', 'ada', 'ada@xn--.com', 'ada@1.2.3.4', 'ada@0x7f.1']) {
      expect(normaliseEmail(raw), raw).toBe(raw);
    }
  });

  it('stores and checks the same address: the accepted form is the canonical one', async () => {
    expect(await checkEmail('bad@ｇmail.com', off)).toEqual({ accepted: true, email: 'bad@gmail.com' });
    expect(await checkEmail('bad@gm\u00ADail.com', off)).toEqual({ accepted: true, email: 'bad@gmail.com' });
    expect(await checkEmail('Anna@xn--mnchen-3ya.de', off)).toEqual({ accepted: true, email: 'anna@münchen.de' });
    // A disposable domain in another spelling is still disposable.
    expect(await checkEmail('ada@ｍailinator.com', off)).toMatchObject({ accepted: false, problem: 'disposable' });
    expect(isWellFormedEmail('anna@münchen.de')).toBe(true);
    expect(isWellFormedEmail('ANNA@xn--mnchen-3ya.de')).toBe(true);
  });
});

describe('mailboxKey', () => {
  it('drops a +tag for every domain, and dots at Gmail, where googlemail.com is gmail.com', () => {
    const keys: Array<[string, string]> = [
      ['bad@gmail.com', 'bad@gmail.com'],
      ['b.ad@gmail.com', 'bad@gmail.com'],
      ['B.A.D+taxi@Gmail.com', 'bad@gmail.com'],
      ['bad@googlemail.com', 'bad@gmail.com'],
      ['b.ad+x@GoogleMail.com', 'bad@gmail.com'],
      ['bad@ｇmail.com', 'bad@gmail.com'],
      ['b.ad+x+y@gm\u00ADail.com', 'bad@gmail.com'],
      ['ada.lovelace+taxi@example.com', 'ada.lovelace@example.com'], // dots count elsewhere
      ['anna+x@xn--mnchen-3ya.de', 'anna@münchen.de'],
      ['+tag@example.com', '+tag@example.com'], // nothing before the +: kept whole
    ];
    for (const [raw, key] of keys) {
      expect(mailboxKey(raw), raw).toBe(key);
      expect(mailboxKey(key), `${raw}: idempotent`).toBe(key);
    }
  });
});

describe('malformed', () => {
  const malformed = [
    '',
    '   ',
    'plainaddress',
    '@example.com',
    'ada@',
    'ada@@example.com',
    'ada@exa@mple.com',
    'ada lovelace@example.com',
    'ada@exam ple.com',
    'ada@exam\tple.com',
    '.ada@example.com',
    'ada.@example.com',
    'ada..lovelace@example.com',
    'ada@localhost',
    'ada@example',
    'ada@-example.com',
    'ada@example-.com',
    'ada@exa_mple.com',
    'ada@example..com',
    'ada@.example.com',
    'ada@example.com.',
    'ada@example.c',
    'ada@example.123',
    'ada@1.2.3.4',
    'ada@[127.0.0.1]',
    '"ada"@example.com',
    'ada(comment)@example.com',
    'adá@example.com',
    'ada,lovelace@example.com',
    'ada@exam;ple.com',
    `${'a'.repeat(65)}@example.com`,
    `ada@${'a'.repeat(64)}.com`,
    `${'a'.repeat(61)}@${'abcdefghi.'.repeat(18)}example.co.uk`, // 255 characters in all
    `a@${'abcdefghi.'.repeat(25)}co.uk`, // a domain of 255 characters
  ];

  it.each(malformed)('%j is malformed', async (raw) => {
    const r = await checkEmail(raw, off);
    expect(r).toEqual({ accepted: false, email: normaliseEmail(raw), problem: 'malformed' });
  });

  const wellFormed: Array<[string, string]> = [
    ['Ada.Lovelace@Example.COM', 'ada.lovelace@example.com'],
    ['  ada@example.org  ', 'ada@example.org'],
    ["o'brien@example.ie", "o'brien@example.ie"],
    ['ada+taxi@example.co.uk', 'ada+taxi@example.co.uk'],
    ['a_b-c.d@sub.example-mail.com', 'a_b-c.d@sub.example-mail.com'],
    ['ada@münchen.de', 'ada@münchen.de'],
    ['ada@xn--mnchen-3ya.de', 'ada@münchen.de'],
    ['ada@example.xn--p1ai', 'ada@example.рф'],
    [`${'a'.repeat(64)}@example.com`, `${'a'.repeat(64)}@example.com`],
    [`${'a'.repeat(60)}@${'abcdefghi.'.repeat(18)}example.co.uk`, ''], // 254 characters in all
  ];

  it.each(wellFormed)('%j is accepted', async (raw, email) => {
    const r = await checkEmail(raw, off);
    expect(r.accepted).toBe(true);
    expect(r.email).toBe(email || normaliseEmail(raw));
  });

  it('checks the lengths at their limits', () => {
    expect(`${'a'.repeat(60)}@${'abcdefghi.'.repeat(18)}example.co.uk`).toHaveLength(254);
    expect(`${'a'.repeat(61)}@${'abcdefghi.'.repeat(18)}example.co.uk`).toHaveLength(255);
  });
});

describe('disposable', () => {
  it.each(['ada@mailinator.com', 'ada@yopmail.com', 'ada@guerrillamail.com', 'Ada@MAILINATOR.COM'])(
    '%s is disposable',
    async (raw) => {
      expect(await checkEmail(raw, off)).toMatchObject({ accepted: false, problem: 'disposable' });
    },
  );

  it('treats a subdomain of a listed domain as disposable', async () => {
    expect(isDisposableDomain('mailinator.com')).toBe(true);
    expect(isDisposableDomain('eu.mailinator.com')).toBe(true);
    expect(await checkEmail('ada@a.b.mailinator.com', off)).toMatchObject({ accepted: false, problem: 'disposable' });
  });

  it('does not match on a suffix that is not a parent domain, nor on ordinary providers', async () => {
    expect(isDisposableDomain('myyopmail.com')).toBe(false);
    expect(isDisposableDomain('yopmail.com.example.org')).toBe(false);
    for (const d of ['gmail.com', 'outlook.com', 'btinternet.com', 'example.co.uk']) {
      expect(isDisposableDomain(d), d).toBe(false);
    }
    expect(await checkEmail('ada@gmail.com', off)).toEqual({ accepted: true, email: 'ada@gmail.com' });
  });

  it('is the npm package’s whole list (updated with the package), not a list of our own', async () => {
    const listed = [...disposableEmailBlocklistSet()];
    expect(listed.length).toBeGreaterThan(1000);
    // Every hundredth entry, from one end to the other.
    for (let i = 0; i < listed.length; i += 100) {
      const domain = listed[i] as string;
      expect(isDisposableDomain(domain), domain).toBe(true);
      expect(await checkEmail(`ada@${domain}`, off), domain).toMatchObject({ accepted: false, problem: 'disposable' });
    }
  });

  it('is checked before the role rule', async () => {
    expect(await checkEmail('info@mailinator.com', off)).toMatchObject({ problem: 'disposable' });
  });
});

describe('role addresses', () => {
  it.each([
    'info@example.com',
    'INFO@example.com',
    'info+taxi@example.com',
    'bookings@example.com',
    'booking+2024@example.com',
    'admin@example.com',
    'sales@example.com',
    'support@example.com',
    'contact@example.com',
    'office@example.com',
    'hello@example.com',
    'enquiries@example.com',
    'noreply@example.com',
    'no-reply@example.com',
    'no_reply@example.com',
    'no.reply+x@example.com',
    'postmaster@example.com',
    'webmaster@example.com',
    'abuse@example.com',
    'billing@example.com',
    'accounts@example.com',
    'team@example.com',
    'reservations@example.com',
    'mail@example.com',
    'help@example.com',
    'hr@example.com',
    'jobs@example.com',
    'marketing@example.com',
    'customer.service@example.com',
  ])('%s is a role address', async (raw) => {
    expect(await checkEmail(raw, off)).toMatchObject({ accepted: false, problem: 'role_address' });
  });

  it.each(['ada.info@example.com', 'infoada@example.com', 'salesforce.fan@example.com', 'helen@example.com'])(
    '%s is personal',
    async (raw) => {
      expect(await checkEmail(raw, off)).toMatchObject({ accepted: true });
    },
  );

  it('documents its list and ignores plus tags and separators', () => {
    expect(ROLE_LOCAL_PARTS).toEqual(expect.arrayContaining(['info', 'bookings', 'noreply', 'postmaster']));
    expect(isRoleLocalPart('Support+Urgent')).toBe(true);
    expect(isRoleLocalPart('ada+support')).toBe(false);
  });
});

describe('mail server (MX) check', () => {
  type Case = [string, ResolveMx, ResolveAddresses | undefined, boolean, boolean];
  // name, MX resolver, A/AAAA resolver, accepted in strict, accepted in soft
  const cases: Case[] = [
    ['an MX record', mxOk, undefined, true, true],
    ['no MX but an A record (RFC 5321 implicit MX)', mxFails('ENODATA'), addresses(['192.0.2.1']), true, true],
    ['no MX but an AAAA record', async () => [], addresses(['2001:db8::1']), true, true],
    ['no MX and no address records', mxFails('ENODATA'), addressesFail('ENODATA'), false, false],
    ['no MX, no fallback resolver given', mxFails('ENODATA'), undefined, false, false],
    ['an empty MX answer and no addresses', async () => [], addresses([]), false, false],
    ['NXDOMAIN', mxFails('ENOTFOUND'), addresses(['192.0.2.1']), false, false],
    ['a null MX (RFC 7505)', async () => [{ exchange: '', priority: 0 }], addresses(['192.0.2.1']), false, false],
    ['SERVFAIL', mxFails('ESERVFAIL'), undefined, false, true],
    ['a resolver timeout', mxFails('ETIMEOUT'), undefined, false, true],
    ['connection refused', mxFails('ECONNREFUSED'), undefined, false, true],
    ['an error without a code', async () => Promise.reject(new Error('boom')), undefined, false, true],
    ['no MX and the A lookup fails', mxFails('ENODATA'), addressesFail('ESERVFAIL'), false, true],
    ['no answer within the time limit', never, undefined, false, true],
  ];

  for (const mode of ['strict', 'soft'] as const) {
    it.each(cases)(`${mode}: %s`, async (_name, resolveMx, resolveAddresses, strictOk, softOk) => {
      const r = await checkEmail('ada@example.com', {
        mx: mode,
        resolveMx,
        ...(resolveAddresses ? { resolveAddresses } : {}),
        timeoutMs: 50,
      });
      const ok = mode === 'strict' ? strictOk : softOk;
      expect(r).toEqual(
        ok
          ? { accepted: true, email: 'ada@example.com' }
          : { accepted: false, email: 'ada@example.com', problem: 'no_mail_server' },
      );
    });
  }

  it('off never looks anything up', async () => {
    const resolveMx = vi.fn(mxFails('ENOTFOUND'));
    const resolveAddresses = vi.fn(addresses([]));
    expect(await checkEmail('ada@no-such-domain.example', { mx: 'off', resolveMx, resolveAddresses })).toEqual({
      accepted: true,
      email: 'ada@no-such-domain.example',
    });
    expect(resolveMx).not.toHaveBeenCalled();
    expect(resolveAddresses).not.toHaveBeenCalled();
  });

  it('looks up the ASCII (punycode) domain, and only for addresses that passed the other rules', async () => {
    const resolveMx = vi.fn(mxOk);
    expect(await checkEmail('Ada@München.de', { mx: 'strict', resolveMx })).toMatchObject({ accepted: true });
    expect(resolveMx).toHaveBeenCalledWith('xn--mnchen-3ya.de');
    resolveMx.mockClear();
    await checkEmail('not an address', { mx: 'strict', resolveMx });
    await checkEmail('ada@mailinator.com', { mx: 'strict', resolveMx });
    await checkEmail('info@example.com', { mx: 'strict', resolveMx });
    expect(resolveMx).not.toHaveBeenCalled();
  });

  it('asks for the fallback addresses only when there is no MX', async () => {
    const resolveAddresses = vi.fn(addresses(['192.0.2.1']));
    await checkEmail('ada@example.com', { mx: 'strict', resolveMx: mxOk, resolveAddresses });
    expect(resolveAddresses).not.toHaveBeenCalled();
    await checkEmail('ada@example.com', { mx: 'strict', resolveMx: mxFails('ENODATA'), resolveAddresses });
    expect(resolveAddresses).toHaveBeenCalledWith('example.com');
  });
});
