// Single sign-on in a real browser (started by the C++ harness,
// tests/ui/console_test.cpp, beside a real OpenID Connect provider): the
// sign-in page's button, the provider's own sign-in and consent pages,
// back in the console as the operator the groups claim makes; someone in
// no mapped group sent back to the sign-in page with its words; a forged
// answer (another browser's state) refused.
// Prints a line per check and "N passed, M failed"; exits 1 on a failure.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { assert, check, finish } from './checks.mjs';

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
};
const base = env('DUCTUS_UI_URL').replace(/\/$/, '');
const shots = env('DUCTUS_UI_SCREENSHOTS');
mkdirSync(shots, { recursive: true });
const WAIT = 30_000;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'], headless: true });

async function newPage() {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  return { context, page };
}

// Waits for `locator`; on a timeout, says where the browser is and what it shows.
async function shown(page, locator, what) {
  try {
    await locator.waitFor();
  } catch (e) {
    const text = (await page.locator('body').innerText().catch(() => '')).replace(/\s+/g, ' ').slice(0, 300);
    throw new Error(`no ${what} at ${page.url()}: "${text}"`);
  }
}

// The provider's development pages: a sign-in form (any name), then consent.
async function throughProvider(page, name) {
  await page.locator('input[name="login"]').fill(name);
  await page.locator('input[name="password"]').fill('any');
  await page.locator('button[type="submit"]').click();
  await page.locator('button[type="submit"]').filter({ hasText: /continue/i }).click();
}

await check('an operator signs in with the provider, back in the console as operator', async () => {
  const { context, page } = await newPage();
  await page.goto('/');
  const button = page.getByRole('link', { name: 'Sign in with Test provider' });
  await button.waitFor();
  await page.screenshot({ path: join(shots, 'signin-sso.png') });
  await button.click();
  await throughProvider(page, 'olivia');
  await shown(page, page.getByRole('heading', { level: 1, name: 'Overview' }), 'Overview');
  await page.getByRole('navigation', { name: 'Main' }).getByText('olivia', { exact: true }).waitFor();
  const me = await page.evaluate(async () => (await fetch('/api/v1/me')).json());
  assert(me.role === 'operator' && me.source === 'oidc', `me: ${JSON.stringify(me)}`);
  // No tokens for single sign-on users: one would outlive the provider's "no".
  const token = await page.evaluate(async () => {
    const r = await fetch('/api/v1/me/tokens', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Ductus': '1' },
      body: JSON.stringify({ name: 'script', role: 'viewer' }),
    });
    return { status: r.status, body: await r.json() };
  });
  assert(token.status === 400 && token.body.error === 'sso_user', `token: ${JSON.stringify(token)}`);
  await context.close();
});

await check('someone in no mapped group is sent back with the console\'s words', async () => {
  const { context, page } = await newPage();
  await page.goto('/');
  await page.getByRole('link', { name: 'Sign in with Test provider' }).click();
  await throughProvider(page, 'nina');
  await shown(page, page.getByText('none of the groups that have a role here'), 'refusal');
  assert(!page.url().includes('signin_error'), `the error stays in the address: ${page.url()}`);
  const me = await page.evaluate(async () => (await fetch('/api/v1/me')).status);
  assert(me === 401, `signed in after all: ${me}`);
  await page.screenshot({ path: join(shots, 'signin-sso-refused.png') });
  await context.close();
});

await check('an answer for a sign-on this browser did not begin is refused', async () => {
  const { context, page } = await newPage();
  // Sent to the callback with a code and a state it never had (a link in
  // a mail, say): no session, and the console says so.
  await page.goto('/api/v1/auth/oidc/callback?code=forged&state=forged');
  await page.getByText('Single sign-on did not complete').waitFor();
  const me = await page.evaluate(async () => (await fetch('/api/v1/me')).status);
  assert(me === 401, `signed in: ${me}`);
  await context.close();
});

await browser.close();
finish();
