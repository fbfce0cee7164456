// The console in a real browser against a real engine (started by the C++
// harness, tests/ui): sign-in, live counts, a quarantined message edited and
// delivered, a dismissal found in the audit log, a pause's health badge, an
// alert acknowledged and silenced, a shorter retention confirmed, the forced password change, a viewer's
// limits, two-step sign-in set up (its QR code read by zbarimg) and used, and axe-core on every main page in both themes (AAA for badges).
// Prints a line per check and "N passed, M failed"; exits 1 on a failure.
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { assert, check, finish } from './checks.mjs';
import { WAIT, axe as axeOn, credentials, env, heading, launch, newPage as openPage, sendHl7, signIn, until } from './harness.mjs';

const base = env('DUCTUS_UI_URL').replace(/\/$/, '');
const admin = credentials(env('DUCTUS_UI_ADMIN'));
const viewer = credentials(env('DUCTUS_UI_VIEWER'));
const newUser = credentials(env('DUCTUS_UI_NEWUSER'));
const [mllpHost, mllpPort] = env('DUCTUS_UI_MLLP').split(':');
const outDir = env('DUCTUS_UI_OUT');
const shots = env('DUCTUS_UI_SCREENSHOTS');
mkdirSync(shots, { recursive: true });

const run = `${Date.now().toString(36)}`;

const send = (message) => sendHl7(`${mllpHost}:${mllpPort}`, message);

// The code an authenticator app shows (RFC 6238: HMAC-SHA-1, 6 digits,
// 30 s), from the base32 secret the console shows: written here, not
// taken from the engine.
function appCode(secret, at = Date.now()) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const key = [];
  let bits = 0;
  let value = 0;
  for (const c of secret.replace(/[\s=]/g, '').toUpperCase()) {
    value = ((value << 5) | alphabet.indexOf(c)) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      key.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30_000)));
  const mac = createHmac('sha1', Buffer.from(key)).update(counter).digest();
  const o = mac[mac.length - 1] & 15;
  return String((mac.readUInt32BE(o) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

let seq = 0;
function adt({ mrn, family }) {
  const controlId = `UI-${run}-${++seq}`;
  const text = [
    `MSH|^~\\&|UITEST|WARD|LAB|HOSP|20260101120000||ADT^A01|${controlId}|P|2.5`,
    'EVN|A01|20260101120000',
    `PID|1||${mrn}^^^HOSP^MR||${family}^Jane^Q||19800101|F`,
    'PV1|1|I|WARD^101^1',
  ].join('\r');
  return { controlId, text };
}

const browser = await launch();
const newPage = (options = {}) => openPage(browser, base, options);

async function messageIdOf(page, controlId) {
  return until(`message ${controlId} to be stored`, async () => {
    const r = await page.request.get(`/api/v1/interfaces/adt/messages?control_id=${encodeURIComponent(controlId)}`);
    if (!r.ok()) throw new Error(`${r.status()} ${await r.text()}`);
    return (await r.json()).items?.[0]?.id;
  });
}

async function receivedShown(page) {
  const t = await page.locator('[data-iface="adt"] [data-count="received"]').first().textContent();
  return Number((t ?? '').replace(/[^0-9]/g, ''));
}

const { page, problems } = await newPage();
const state = {};

await check('admin signs in with name and password', async () => {
  await signIn(page, admin);
  await heading(page, 'Overview');
  await page.getByRole('navigation', { name: 'Main' }).getByText(admin.name, { exact: true }).waitFor();
});

await check('Interfaces shows adt, and its counts change as messages arrive, without a reload', async () => {
  await page.getByRole('link', { name: 'Interfaces' }).click();
  await heading(page, 'Interfaces');
  await page.locator('[data-iface="adt"]').waitFor();
  await page.evaluate(() => (window.__sameDocument = true));
  const before = await receivedShown(page);
  for (let i = 0; i < 3; i++) await send(adt({ mrn: `MRN${run}${i}`, family: `Live${i}` }).text);
  await until('the received count to grow by 3', async () => (await receivedShown(page)) >= before + 3);
  assert(await page.evaluate(() => window.__sameDocument === true), 'the page was reloaded');
  await page.screenshot({ path: join(shots, 'interfaces.png'), fullPage: true });
});

await check('Overview shows the engine, totals and adt', async () => {
  await page.getByRole('link', { name: 'Overview' }).click();
  await heading(page, 'Overview');
  await page.locator('[data-iface="adt"]').waitFor();
  await page.getByText('Engines on this database').waitFor();
  await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });
});

await check('messages without an MRN are quarantined and listed in Quarantine', async () => {
  for (const k of ['edit', 'dismiss', 'keep']) {
    const m = adt({ mrn: '', family: `NoMrn${k}` });
    await send(m.text);
    state[k] = await messageIdOf(page, m.controlId);
    state[`${k}Control`] = m.controlId;
  }
  await page.getByRole('link', { name: 'Quarantine' }).click();
  await heading(page, 'Quarantine');
  for (const k of ['edit', 'dismiss', 'keep'])
    await until(`message ${state[k]} in the quarantine list`, async () => {
      if (await page.locator(`tr[data-message="${state[k]}"]`).count()) return true;
      await page.reload();
      return false;
    });
  await page.screenshot({ path: join(shots, 'quarantine.png'), fullPage: true });
});

await check('the message browser finds a message by control id and opens it', async () => {
  await page.goto(`/interfaces/adt/messages?control_id=${encodeURIComponent(state.editControl)}`);
  await heading(page, 'Messages of adt');
  await page.getByRole('link', { name: String(state.edit), exact: true }).click();
  await heading(page, `Message ${state.edit}`);
  await page.locator('dd[data-status="quarantined"]').waitFor();
  await page.getByText('no MRN').first().waitFor();
  const pid5 = page.locator('.hl7 [data-pos="PID-5.1"]').first();
  assert((await pid5.textContent()) === 'NoMrnedit', 'PID-5.1 is not marked in the payload');
  await page.screenshot({ path: join(shots, 'message.png'), fullPage: true });
});

await check('an edited copy (with an MRN) is delivered: its status, and the file', async () => {
  await page.getByRole('button', { name: 'Edit…' }).click();
  const editor = page.getByRole('textbox', { name: 'Payload' });
  const text = await editor.inputValue();
  assert(text.includes('PID|1||^^^HOSP^MR'), `unexpected payload in the editor: ${text}`);
  await editor.fill(text.replace('PID|1||^^^HOSP^MR', `PID|1||MRN${run}E^^^HOSP^MR`));
  await page.getByRole('button', { name: 'Save and deliver the copy' }).click();
  await page.waitForURL((u) => /^\/messages\/\d+$/.test(u.pathname) && u.pathname !== `/messages/${state.edit}`);
  const copy = Number(new URL(page.url()).pathname.split('/').pop());
  await page.getByText(`Stored as an edited copy of message ${state.edit}`).waitFor();
  await page.locator('dd[data-status="sent"]').waitFor();
  const file = join(outDir, `${copy}.hl7`);
  await until(`${file}`, async () => existsSync(file));
  const out = readFileSync(file, 'latin1');
  assert(out.includes(`MRN${run}E`) && out.includes('NOMRNEDIT'), `unexpected output: ${out}`);
  state.copy = copy;
});

await check('a quarantined message is dismissed with a reason, and the action is in the audit log', async () => {
  await page.goto('/quarantine');
  await heading(page, 'Quarantine');
  const row = page.locator(`tr[data-message="${state.dismiss}"]`);
  await row.getByRole('button', { name: 'Dismiss' }).click();
  const dialog = page.getByRole('dialog');
  // Without a reason the form is not sent: the dialog stays, the row too.
  await dialog.getByRole('button', { name: 'Dismiss' }).click();
  assert(await dialog.isVisible(), 'the dialog closed without a reason');
  assert(await dialog.getByLabel(/Reason/).evaluate((t) => t.matches(':invalid')), 'an empty reason is not refused');
  const reason = `duplicate of a corrected message (${run})`;
  await dialog.getByLabel(/Reason/).fill(reason);
  await dialog.getByRole('button', { name: 'Dismiss' }).click();
  await page.getByText('1 message dismissed.').waitFor();
  await until('the row to go', async () => (await row.count()) === 0);
  await page.getByRole('link', { name: 'Audit log' }).click();
  await heading(page, 'Audit log');
  await page.getByLabel('Action').fill('message.dismiss');
  await page.getByRole('button', { name: 'Filter' }).click();
  const entry = page.locator('tr[data-action="message.dismiss"]', { hasText: reason });
  await entry.waitFor();
  assert((await entry.textContent()).includes(admin.name), 'the audit row does not name the admin');
});

await check('a destination is paused with a reason and resumed, each after a confirmation', async () => {
  await page.getByRole('link', { name: 'Interfaces' }).click();
  await heading(page, 'Interfaces');
  const panel = page.locator('section[data-iface="adt"]');
  await panel.getByRole('button', { name: 'Pause…' }).first().click();
  const reason = `maintenance window (${run})`;
  await page.getByRole('dialog').getByLabel(/Reason/).fill(reason);
  await page.getByRole('dialog').getByRole('button', { name: 'Pause' }).click();
  await panel.getByText(reason).waitFor();
  // The monitor's judgement follows: a badge (a word, coloured) and why.
  await panel.locator('[data-dest="default"] [data-health="paused"] .badge', { hasText: 'paused' }).waitFor();
  await panel.locator('.iface-health [data-health="paused"]').waitFor();
  assert(((await panel.locator('.iface-health .health-reason').textContent()) ?? '').trim().length > 0, 'no reason beside the health');
  await page.screenshot({ path: join(shots, 'interfaces-paused.png'), fullPage: true });
  await page.getByRole('link', { name: 'Overview' }).click();
  await heading(page, 'Overview');
  await page.locator('tr[data-iface="adt"] [data-cell="health"] [data-health="paused"]').waitFor();
  await page.screenshot({ path: join(shots, 'overview-paused.png'), fullPage: true });
  await page.getByRole('link', { name: 'Interfaces' }).click();
  await heading(page, 'Interfaces');
  await panel.getByRole('button', { name: 'Resume…' }).first().click();
  await page.getByRole('dialog').getByRole('button', { name: 'Resume' }).click();
  await panel.getByRole('button', { name: 'Pause…' }).first().waitFor();
  assert((await panel.getByText(reason).count()) === 0, 'still shown as paused');
  await until('the health to leave paused', async () => (await panel.locator('[data-dest="default"] [data-health="paused"]').count()) === 0);
});

await check('an alert fires for the quarantine; an operator acknowledges and silences it on Alerts', async () => {
  await page.getByRole('link', { name: 'Alerts' }).click();
  await heading(page, 'Alerts');
  // The alerts' round runs every 15 s.
  const row = page.locator('tr[data-alert]', { hasText: 'adt → default' });
  await until('the alert on adt → default', async () => {
    if (await row.count()) return true;
    await page.getByRole('button', { name: 'Refresh' }).click();
    return false;
  }, 60_000);
  assert(((await row.textContent()) ?? '').includes('firing'), `not firing: ${await row.textContent()}`);
  await row.getByRole('button', { name: 'Acknowledge…' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Acknowledge' }).click();
  await page.getByText('is acknowledged: no more reminders').waitFor();
  await row.locator('[data-cell="acknowledged"]', { hasText: `by local:${admin.name}` }).or(row.locator('[data-cell="acknowledged"]', { hasText: admin.name })).first().waitFor();
  assert((await row.getByRole('button', { name: 'Acknowledge…' }).count()) === 0, 'still offered to acknowledge');
  await row.getByRole('button', { name: 'Silence…' }).click();
  await page.getByRole('dialog').getByLabel('For').selectOption('2h');
  await page.getByRole('dialog').getByRole('button', { name: 'Silence' }).click();
  await page.getByText('is silenced for 2h').waitFor();
  await row.getByText('silenced until').waitFor();
  await page.screenshot({ path: join(shots, 'alerts.png'), fullPage: true });
});

await check('Retention: an operator confirms the shorter tier an interface waits for', async () => {
  await page.getByRole('link', { name: 'Retention' }).click();
  await heading(page, 'Retention');
  const row = page.locator('tr[data-retention="archive"]');
  await row.waitFor();
  assert(((await row.textContent()) ?? '').includes('waiting for a confirmation'), `not waiting: ${await row.textContent()}`);
  assert(((await page.locator('tr[data-retention="adt"]').textContent()) ?? '').includes('7w'), 'adt is not shown keeping 7w');
  await page.locator('tr[data-period]').first().waitFor();
  await row.getByRole('button', { name: 'Confirm 1w…' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Confirm 1w' }).click();
  await page.getByText('archive now keeps its new messages 1w.').waitFor();
  await row.locator('[data-cell="applied"]', { hasText: '1w' }).waitFor();
  assert((await row.getByRole('button', { name: /Confirm/ }).count()) === 0, 'still offered to confirm');
  await page.screenshot({ path: join(shots, 'retention.png'), fullPage: true });
});

await check('two quarantined messages are resent in bulk', async () => {
  const ids = [];
  for (const k of ['bulk1', 'bulk2']) {
    const m = adt({ mrn: '', family: k });
    await send(m.text);
    ids.push(await messageIdOf(page, m.controlId));
  }
  await page.getByRole('link', { name: 'Quarantine' }).click();
  await heading(page, 'Quarantine');
  for (const id of ids)
    await until(`message ${id} in the quarantine list`, async () => {
      if (await page.locator(`tr[data-message="${id}"]`).count()) return true;
      await page.reload();
      return false;
    });
  for (const id of ids) await page.getByLabel(`Select message ${id}`).check();
  await page.getByRole('button', { name: 'Resend selected…' }).click();
  await page.getByRole('dialog', { name: 'Resend 2 messages?' }).getByRole('button', { name: 'Resend' }).click();
  await page.getByText('2 deliveries of 2 messages moved back to pending.').waitFor();
});

await check('the theme chosen (dark over a light system) is applied and kept across a reload', async () => {
  await page.emulateMedia({ colorScheme: 'light' });
  await page.getByLabel('Theme').selectOption('dark');
  const dark = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor === 'rgb(17, 20, 24)');
  await until('the dark theme', dark);
  await page.reload();
  await heading(page, 'Quarantine');
  await until('the dark theme after a reload', dark);
  await page.getByLabel('Theme').selectOption('system');
  await until('the light theme again', async () => !(await dark()));
});

await check('an admin creates a token in My tokens; signed in with it, counts refresh by polling', async () => {
  await page.getByRole('link', { name: 'My tokens' }).click();
  await heading(page, 'My tokens');
  const form = page.getByRole('form', { name: 'Create a token' });
  await form.getByLabel('Name').fill(`ui-${run}`);
  await form.getByLabel('Role').selectOption('viewer');
  await form.getByRole('button', { name: 'Create' }).click();
  const token = ((await page.locator('code.secret').textContent()) ?? '').trim();
  assert(/^dux_[0-9a-f]{64}$/.test(token), `no token shown: ${token}`);
  await page.locator('tr', { hasText: `ui-${run}` }).waitFor();
  const { context, page: p, problems: pp } = await newPage();
  await p.goto('/');
  await p.getByLabel('API token').check();
  await p.getByLabel(/Token/).fill(token);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await heading(p, 'Overview');
  await p.getByRole('link', { name: 'Interfaces' }).click();
  await p.getByText('Refreshed every 5 s').waitFor();
  const before = await receivedShown(p);
  await send(adt({ mrn: `MRN${run}T`, family: 'Token' }).text);
  await until('the received count to grow', async () => (await receivedShown(p)) > before);
  assert((await p.getByRole('button', { name: /Pause/ }).count()) === 0, 'a viewer token sees pause buttons');
  assert(pp.length === 0, pp.join('\n'));
  await context.close();
});

await check('no CSP violation or script error in the admin session', async () => {
  assert(problems.length === 0, problems.join('\n'));
});

await check('the forced password change: a new operator must choose a password first', async () => {
  const { context, page: p, problems: pp } = await newPage();
  await signIn(p, newUser);
  await heading(p, 'Choose a new password');
  const fresh = `New-${run}-password-1`;
  await p.getByLabel('Current password').fill(newUser.password);
  await p.getByLabel('New password (at least 12 characters)').fill(fresh);
  await p.getByLabel('New password again').fill(fresh);
  await p.getByRole('button', { name: 'Change password' }).click();
  await heading(p, 'Overview');
  const me = await (await p.request.get('/api/v1/me')).json();
  assert(me.name === newUser.name && me.mustChangePassword === false, JSON.stringify(me));
  assert(pp.length === 0, pp.join('\n'));
  await context.close();
});

await check('a viewer sees no resend button, and the API refuses a resend (403)', async () => {
  const { context, page: p } = await newPage();
  await signIn(p, viewer);
  await heading(p, 'Overview');
  await p.goto(`/messages/${state.keep}`);
  await heading(p, `Message ${state.keep}`);
  await p.locator('dd[data-status="quarantined"]').waitFor();
  assert((await p.getByRole('button', { name: /Resend/ }).count()) === 0, 'a resend button on the message');
  await p.goto('/quarantine');
  await heading(p, 'Quarantine');
  await p.locator(`tr[data-message="${state.keep}"]`).waitFor();
  assert((await p.getByRole('button', { name: /Resend|Dismiss/ }).count()) === 0, 'resend or dismiss buttons in Quarantine');
  assert((await p.getByRole('link', { name: 'Audit log' }).count()) === 0, 'the viewer sees the audit log');
  await p.goto('/alerts');
  await heading(p, 'Alerts');
  await p.locator('tr[data-alert]').first().waitFor();
  assert((await p.getByRole('button', { name: /Acknowledge|Silence/ }).count()) === 0, 'a viewer is offered to acknowledge or silence');
  const r = await p.request.post(`/api/v1/messages/${state.keep}/resend`, { headers: { 'X-Ductus': '1' }, data: {} });
  assert(r.status() === 403, `resend answered ${r.status()}`);
  // Tokens of their own are every role's: a viewer makes one in My tokens.
  await p.getByRole('link', { name: 'My tokens' }).click();
  await heading(p, 'My tokens');
  const form = p.getByRole('form', { name: 'Create a token' });
  await form.getByLabel('Name').fill(`viewer-script-${run}`);
  await form.getByLabel('Role').selectOption('viewer');
  await form.getByRole('button', { name: 'Create' }).click();
  await p.getByText('The new token, shown this once').waitFor();
  await p.getByRole('row', { name: new RegExp(`viewer-script-${run}`) }).waitFor();
  await context.close();
});

await check('two-step sign-in: a viewer turns it on in the console, then signs in with the app’s code', async () => {
  const { context, page: p, problems: pp } = await newPage();
  await signIn(p, viewer);
  await heading(p, 'Overview');
  await p.getByRole('link', { name: 'Two-step sign-in' }).click();
  await heading(p, 'Two-step sign-in');
  await p.getByLabel('Your password, to set it up').fill(viewer.password);
  await p.getByRole('button', { name: 'Set up' }).click();
  const secret = (await p.locator('code.totp-secret').getAttribute('data-secret')) ?? '';
  assert(/^[A-Z2-7]{32}$/.test(secret), `no secret shown: ${secret}`);
  // The QR code, read by a decoder we did not write (zbar's), carries the
  // otpauth:// link with this secret.
  const qrFile = join(shots, 'totp-qr.png');
  await p.locator('svg.qr').screenshot({ path: qrFile });
  const decoded = execFileSync('zbarimg', ['--raw', '-q', qrFile], { encoding: 'utf8' }).trim();
  const link = await p.getByRole('link', { name: 'Open in the authenticator app' }).getAttribute('href');
  assert(decoded === link && decoded.includes(`secret=${secret}`), `the QR code reads "${decoded}", the link is ${link}`);
  await p.getByLabel('The code the app shows now').fill(appCode(secret));
  await p.getByRole('button', { name: 'Turn on' }).click();
  await p.locator('.recovery-codes code').first().waitFor();
  const codes = await p.locator('.recovery-codes code').allTextContents();
  assert(codes.length === 10 && codes.every((c) => /^[a-z2-7]{5}-[a-z2-7]{5}$/.test(c)), `recovery codes: ${codes.join(' ')}`);
  await p.screenshot({ path: join(shots, 'totp-recovery-codes.png'), fullPage: true });
  await p.getByRole('button', { name: 'I have kept them' }).click();
  await p.getByRole('button', { name: 'Sign out' }).click();
  // The password alone: the console asks for the code, then signs in.
  await signIn(p, viewer);
  const codeField = p.getByLabel('Code from your authenticator app');
  await codeField.waitFor();
  await codeField.fill(appCode(secret, Date.now() + 30_000));
  await p.screenshot({ path: join(shots, 'totp-sign-in.png'), fullPage: true });
  await p.getByRole('button', { name: 'Sign in' }).click();
  await heading(p, 'Overview');
  const me = await (await p.request.get('/api/v1/me')).json();
  assert(me.name === viewer.name && me.totp === true, JSON.stringify(me));
  assert(pp.length === 0, pp.join('\n'));
  await context.close();
});

// axe-core needs its source injected, which the console's CSP forbids: this
// context alone bypasses it.
const pages = [
  ['Overview', '/', 'Overview', '[data-iface="adt"]'],
  ['Interfaces', '/interfaces', 'Interfaces', '[data-iface="adt"]'],
  ['Messages', '/interfaces/adt/messages', 'Messages of adt', 'tr[data-message]'],
  ['Message', () => `/messages/${state.keep}`, () => `Message ${state.keep}`, '.hl7'],
  ['Quarantine', '/quarantine', 'Quarantine', 'tr[data-message]'],
  ['Audit log', '/audit', 'Audit log', 'tr[data-action]'],
  ['Alerts', '/alerts', 'Alerts', 'tr[data-alert]'],
  ['Retention', '/retention', 'Retention', 'tr[data-retention]'],
  ['Users', '/users', 'Users and tokens', 'tbody tr'],
  ['Two-step sign-in', '/totp', 'Two-step sign-in', 'button.primary'],
];
{
  const { context, page: p } = await newPage({ bypassCSP: true });
  const axe = () => axeOn(p);
  for (const scheme of ['light', 'dark'])
    await check(`axe: sign-in page, ${scheme}`, async () => {
      await p.emulateMedia({ colorScheme: scheme });
      await p.goto('/signin');
      await heading(p, 'Sign in to Ductus');
      await axe();
    });
  const r = await p.request.post('/api/v1/sessions', { data: admin });
  assert(r.ok(), `sign-in for the axe checks: ${r.status()}`);
  for (const scheme of ['light', 'dark'])
    for (const [label, path, title, ready] of pages)
      await check(`axe: ${label}, ${scheme}`, async () => {
        await p.emulateMedia({ colorScheme: scheme });
        await p.goto(typeof path === 'function' ? path() : path);
        await heading(p, typeof title === 'function' ? title() : title);
        await p.locator(ready).first().waitFor();
        await p.waitForFunction(() => !document.querySelector('[aria-busy="true"]'));
        await axe();
        // The status badges (health among them) carry meaning in a word and
        // a colour: AAA contrast (7:1) for them, as a high-contrast need.
        const aaa = await p.evaluate(() =>
          document.querySelector('.badge')
            ? window.axe.run({ include: [['.badge']] }, { runOnly: { type: 'rule', values: ['color-contrast-enhanced'] } })
            : { violations: [] },
        );
        assert(
          aaa.violations.length === 0,
          aaa.violations.map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')} ${n.any[0]?.message ?? ''}`).join(', ')}`).join('; '),
        );
        if (scheme === 'dark' && ['Overview', 'Interfaces', 'Message', 'Quarantine', 'Alerts'].includes(label))
          await p.screenshot({ path: join(shots, `${label.toLowerCase()}-dark.png`), fullPage: true });
      });
  await context.close();
}

await browser.close();
finish();
