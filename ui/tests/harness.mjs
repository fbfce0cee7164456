// What the browser tests share beyond checks.mjs: their settings from the
// environment, waiting for a condition, an MLLP sender, Debian's chromium
// through playwright-core, signing in, and axe-core on a page.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createConnection } from 'node:net';
import { chromium } from 'playwright-core';
import { assert } from './checks.mjs';

export function env(name, fallback) {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
}

/** "name:password" as the C++ harness passes a user. */
export function credentials(v) {
  const i = v.indexOf(':');
  return { name: v.slice(0, i), password: v.slice(i + 1) };
}

// Long enough for a loaded machine; nothing here is a timing assertion.
export const WAIT = 30_000;

export async function until(what, fn, timeout = WAIT) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** MLLP to "host:port": <VT> message <FS><CR>; resolves with the ACK when
 * it is AA or CA, rejects otherwise. */
export function sendHl7(address, message) {
  const [host, port] = address.split(':');
  return new Promise((resolvePromise, reject) => {
    const socket = createConnection({ host, port: Number(port) });
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no ACK within 30 s'));
    }, WAIT);
    socket.on('connect', () => socket.write(Buffer.concat([Buffer.from([0x0b]), Buffer.from(message, 'latin1'), Buffer.from([0x1c, 0x0d])])));
    socket.on('data', (d) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf(Buffer.from([0x1c, 0x0d]));
      if (end < 0) return;
      clearTimeout(timer);
      socket.end();
      const ack = got.subarray(1, end).toString('latin1');
      const code = /\rMSA\|([A-Z]{2})/.exec(ack)?.[1];
      if (code === 'AA' || code === 'CA') resolvePromise(ack);
      else reject(new Error(`not accepted: ${ack.replace(/\r/g, ' / ')}`));
    });
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** Whether a TCP connect to "host:port" is refused (nothing listens). */
export function refused(address) {
  const [host, port] = address.split(':');
  return new Promise((resolvePromise) => {
    const socket = createConnection({ host, port: Number(port) });
    socket.on('connect', () => {
      socket.destroy();
      resolvePromise(false);
    });
    socket.on('error', (e) => resolvePromise(e.code === 'ECONNREFUSED'));
  });
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
    headless: true,
  });
}

/** A page of its own context; `problems` collects CSP refusals and page errors. */
export async function newPage(browser, base, options = {}) {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 860 }, ...options });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  return { context, page, problems };
}

export async function signIn(page, who) {
  await page.goto('/');
  await page.getByLabel('Name', { exact: true }).fill(who.name);
  await page.getByLabel('Password', { exact: true }).fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

export async function heading(page, text) {
  await page.getByRole('heading', { level: 1, name: text }).waitFor();
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core on the page as it is: no serious or critical violation of WCAG
 * 2.1 A and AA. The page's context must bypass the CSP (newPage(browser,
 * base, { bypassCSP: true })), which forbids injecting axe's source. */
export async function axe(page) {
  await page.addScriptTag({ content: axeSource });
  const result = await page.evaluate(() =>
    window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }),
  );
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert(
    bad.length === 0,
    bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`).join('; '),
  );
}
