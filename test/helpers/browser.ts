import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * Browser tests drive Debian's Chromium (not a browser downloaded by Playwright) through
 * `playwright-core`: one browser per test file, a fresh context (cookies, storage) per test, with
 * a phone-sized viewport, British English and London time. Screenshots go to
 * `artifacts/screenshots/` (kept by the test run, ignored by git); `expectAccessible` runs
 * axe-core in the page and fails on serious or critical violations.
 *
 * Pages keep their strict Content-Security-Policy in these tests (no `bypassCSP`): axe is
 * evaluated through the DevTools protocol, which CSP does not govern, so the page's own scripts
 * still run exactly as a passenger's browser runs them.
 */

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
export const SCREENSHOT_DIR = path.join(ROOT, 'artifacts', 'screenshots');

/** Where Chromium is: CHROMIUM_PATH, else Debian's (`chromium`) or Ubuntu's older name. */
export function chromiumPath(): string {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(
    (p): p is string => typeof p === 'string' && p !== '',
  );
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(
      `Chromium was not found (looked at ${candidates.join(', ')}). The browser tests need it: ` +
        'run `apt-get install chromium` as root (or `bash bin/bootstrap.sh test`, which does), ' +
        'or set CHROMIUM_PATH to a Chromium or Chrome binary.',
    );
  }
  return found;
}

/** A headless Chromium that runs as root in a container: no sandbox, no /dev/shm (often tiny in containers), no GPU. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    timeout: 60_000,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--no-default-browser-check'],
  });
}

/** Generous waits: the browser tests must pass on a slow, busy two-core machine. */
export const BROWSER_WAIT_MS = 30_000;

/**
 * A new context and page as a passenger's (or driver's) phone: 390×844, en-GB, Europe/London,
 * touch. `desktop`: a 1280×800 laptop instead (the operator pages).
 */
export async function newBrowserPage(
  browser: Browser,
  opts: { desktop?: boolean } = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({
    ...(opts.desktop
      ? { viewport: { width: 1280, height: 800 } }
      : { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true }),
    deviceScaleFactor: 1,
    locale: 'en-GB',
    timezoneId: 'Europe/London',
  });
  context.setDefaultTimeout(BROWSER_WAIT_MS);
  context.setDefaultNavigationTimeout(BROWSER_WAIT_MS);
  const page = await context.newPage();
  return { context, page };
}

/**
 * What went wrong in the page as it ran: uncaught errors, console errors (a script refused by
 * the CSP, a failed request of the page's own) and CSP violation reports.
 */
export function watchPageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`console error: ${msg.text()}`);
  });
  return errors;
}

function testFileTag(): string {
  const testPath = expect.getState().testPath ?? 'browser';
  return path.basename(testPath).replace(/(\.int)?\.test\.ts$/, '');
}

/** A full-page PNG: `artifacts/screenshots/<test-file>-<name>.png`. Returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const safe = name.replace(/[^a-z0-9._-]+/gi, '-');
  const file = path.join(SCREENSHOT_DIR, `${testFileTag()}-${safe}.png`);
  await page.screenshot({ path: file, fullPage: true, animations: 'disabled' });
  return file;
}

// ---------------------------------------------------------------------------------------------
// Accessibility

let axeSource: string | null = null;
function axeScript(): string {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  return axeSource;
}

interface AxeNode {
  target: unknown[];
  html: string;
  failureSummary?: string;
}

export interface AxeViolation {
  id: string;
  impact: 'minor' | 'moderate' | 'serious' | 'critical' | null;
  help: string;
  helpUrl: string;
  nodes: AxeNode[];
}

export interface AccessibilityOptions {
  /** CSS selectors left out of the check (markup that is not ours). */
  exclude?: string[];
}

/** Violations as a readable list: rule, impact, what it asks, and each offending element. */
export function formatViolations(violations: AxeViolation[]): string {
  return violations
    .map((v) =>
      [
        `[${v.impact ?? 'unknown'}] ${v.id}: ${v.help} (${v.helpUrl})`,
        ...v.nodes.map(
          (n) =>
            `    at ${n.target.map(String).join(' ')}\n      ${n.html}\n      ${(n.failureSummary ?? '').replace(/\n/g, '\n      ')}`,
        ),
      ].join('\n'),
    )
    .join('\n');
}

/** Run axe-core (WCAG 2.x A and AA rules and best practices) over the page as it is now. */
export async function axeViolations(page: Page, opts: AccessibilityOptions = {}): Promise<AxeViolation[]> {
  const loaded = await page.evaluate('typeof window.axe === "object"');
  // Evaluated through the DevTools protocol, so the page's CSP (no inline script) does not block it.
  if (!loaded) await page.evaluate(axeScript());
  const context = opts.exclude?.length ? { exclude: opts.exclude.map((s) => [s]) } : wholeDocument();
  const results = (await page.evaluate(
    async ([ctx]) => {
      const axe = (globalThis as unknown as { axe: { run(c: unknown, o: unknown): Promise<unknown> } }).axe;
      return axe.run(ctx, {
        runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
        resultTypes: ['violations'],
      });
    },
    [context] as const,
  )) as { violations: AxeViolation[] };
  return results.violations;
}

/** The whole document, as axe names it. */
function wholeDocument(): { include: string[][] } {
  return { include: [['html']] };
}

/**
 * Fail when the page has serious or critical accessibility violations (printing them all);
 * minor and moderate ones are printed as a warning. Returns every violation found.
 */
export async function expectAccessible(page: Page, opts: AccessibilityOptions = {}): Promise<AxeViolation[]> {
  const violations = await axeViolations(page, opts);
  const blocking = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const others = violations.filter((v) => !blocking.includes(v));
  if (others.length > 0) {
    process.stderr.write(`axe (not failing) on ${page.url()}:\n${formatViolations(others)}\n`);
  }
  expect(
    blocking.map((v) => `${v.id} (${v.impact})`),
    `serious accessibility violations on ${page.url()}:\n${formatViolations(blocking)}`,
  ).toEqual([]);
  return violations;
}
