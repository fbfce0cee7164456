// An admin's console in a real browser (tests/ui/console_test.cpp,
// Console.AnAdminManagesUsers...): a disabled user enabled again, a
// one-time password that must be changed at the next sign-in, another
// role that an open session has at its next request, the last admin kept,
// a directory user's password and role left to the directory; the audit
// log's links to a bulk resend's messages; the first Tab on the Overview
// (after its heading, not the drain);
// the navigation's column down a long page; axe on the Users page and its
// dialog in both themes, with screenshots.
// Prints a line per check and "N passed, M failed"; exits 1 on a failure.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { assert, check, finish } from './checks.mjs';
import { axe, credentials, env, heading, launch, newPage, sendHl7, signIn, until } from './harness.mjs';

const base = env('DUCTUS_UI_URL').replace(/\/$/, '');
const admin = credentials(env('DUCTUS_UI_ADMIN'));
const viewer = credentials(env('DUCTUS_UI_VIEWER'));
const newUser = credentials(env('DUCTUS_UI_NEWUSER'));
const directoryUser = env('DUCTUS_UI_DIRECTORY_USER');
const mllp = env('DUCTUS_UI_MLLP');
const shots = env('DUCTUS_UI_SCREENSHOTS');
mkdirSync(shots, { recursive: true });
const run = Date.now().toString(36);
const changing = { 'X-Ductus': '1' };

const browser = await launch();
const { page, problems } = await newPage(browser, base);
const row = (name) => page.locator(`tr[data-user="${name}"]`);

await check('admin signs in and opens Users and tokens', async () => {
  await signIn(page, admin);
  await heading(page, 'Overview');
  await page.getByRole('link', { name: 'Users and tokens' }).click();
  await heading(page, 'Users and tokens');
  await row(viewer.name).waitFor();
});

await check('a user disabled is enabled again, after a confirmation', async () => {
  await row(viewer.name).getByRole('button', { name: 'Disable…' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Disable' }).click();
  await row(viewer.name).getByText('disabled', { exact: true }).waitFor();
  await row(viewer.name).getByRole('button', { name: 'Enable…' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Enable' }).click();
  await page.getByText(`${viewer.name} is enabled again.`).waitFor();
  await row(viewer.name).getByText('active', { exact: true }).waitFor();
  assert((await row(viewer.name).getByRole('button', { name: 'Enable…' }).count()) === 0, 'still offered to enable');
});

await check("a reset password is shown once, and its user must choose their own at the next sign-in", async () => {
  await row(newUser.name).getByRole('button', { name: 'Reset password…' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Reset password' }).click();
  const shown = page.locator(`[data-password-of="${newUser.name}"]`);
  await shown.waitFor();
  assert(/one-time password/.test((await shown.textContent()) ?? ''), 'not called a one-time password');
  const oneTime = ((await shown.locator('code.secret').textContent()) ?? '').trim();
  assert(/^[A-Za-z0-9]{24}$/.test(oneTime), `no password shown: "${oneTime}"`);
  await row(newUser.name).getByText('must change password').waitFor();
  const { context, page: p, problems: pp } = await newPage(browser, base);
  // The old password no longer opens anything.
  const old = await p.request.post('/api/v1/sessions', { data: newUser });
  assert(old.status() === 401, `the old password answered ${old.status()}`);
  await signIn(p, { name: newUser.name, password: oneTime });
  await heading(p, 'Choose a new password');
  const fresh = `Own-${run}-password-9`;
  await p.getByLabel('Current password').fill(oneTime);
  await p.getByLabel('New password (at least 12 characters)').fill(fresh);
  await p.getByLabel('New password again').fill(fresh);
  await p.getByRole('button', { name: 'Change password' }).click();
  await heading(p, 'Overview');
  assert(pp.length === 0, pp.join('\n'));
  await context.close();
});

await check("another role: the user's open session has it at its next request", async () => {
  const { context, page: p } = await newPage(browser, base);
  await signIn(p, viewer);
  await heading(p, 'Overview');
  assert((await (await p.request.get('/api/v1/me')).json()).role === 'viewer', 'not a viewer to start with');
  await row(viewer.name).getByRole('button', { name: 'Change role…' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Role').selectOption('operator');
  await page.screenshot({ path: join(shots, 'users-role.png'), fullPage: true });
  await dialog.getByRole('button', { name: 'Change role' }).click();
  await page.getByText(`${viewer.name} is now operator, from their next request.`).waitFor();
  await row(viewer.name).locator('[data-cell="role"]', { hasText: 'operator' }).waitFor();
  // Not signed in again: the same session.
  const me = await (await p.request.get('/api/v1/me')).json();
  assert(me.role === 'operator', `the open session has ${me.role}`);
  await p.reload();
  await heading(p, 'Overview');
  await p.getByRole('button', { name: 'Drain engine…' }).waitFor();
  await context.close();
});

await check('the last enabled admin is not demoted: the dialog says why and the role stays', async () => {
  await row(admin.name).getByRole('button', { name: 'Change role…' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Role').selectOption('viewer');
  await dialog.getByRole('button', { name: 'Change role' }).click();
  await dialog.getByRole('alert').filter({ hasText: 'last enabled admin' }).waitFor();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert(((await row(admin.name).locator('[data-cell="role"]').textContent()) ?? '') === 'admin', 'the role changed');
});

await check("a directory user's password and role are the directory's: not offered, and the API says why", async () => {
  const dora = row(directoryUser);
  await dora.getByText('directory password').waitFor();
  assert((await dora.getByRole('button', { name: /Reset password|Change role/ }).count()) === 0, 'offered for a directory user');
  const r = await page.request.put(`/api/v1/users/${directoryUser}/role`, { headers: changing, data: { role: 'admin' } });
  assert(r.status() === 409, `answered ${r.status()}`);
  const body = await r.json();
  assert(body.error === 'directory_user' && /directory/.test(body.message), JSON.stringify(body));
});

await check('each change is in the audit log', async () => {
  await page.goto('/audit');
  await heading(page, 'Audit log');
  for (const action of ['user.enable', 'user.password_reset', 'user.role'])
    await page.locator(`tr[data-action="${action}"]`).first().waitFor();
  const role = page.locator('tr[data-action="user.role"]').first();
  const text = (await role.textContent()) ?? '';
  assert(/from: viewer/.test(text) && /to: operator/.test(text), `the role row: ${text}`);
});

await check("the audit log links each message of a bulk resend, and the link opens it", async () => {
  const ids = [];
  for (let i = 0; i < 2; i++) {
    const controlId = `AD-${run}-${i}`;
    await sendHl7(
      mllp,
      [`MSH|^~\\&|UI|WARD|LAB|HOSP|20260101120000||ADT^A01|${controlId}|P|2.5`, 'EVN|A01|20260101120000', 'PID|1||^^^HOSP^MR||Bulk^Jane||19800101|F'].join(
        '\r',
      ),
    );
    ids.push(
      await until(`message ${controlId}, quarantined`, async () => {
        const r = await page.request.get(`/api/v1/interfaces/adt/messages?control_id=${controlId}&status=quarantined`);
        return (await r.json()).items?.[0]?.id;
      }),
    );
  }
  const r = await page.request.post('/api/v1/messages/resend', { headers: changing, data: { ids } });
  assert(r.ok(), `bulk resend: ${r.status()} ${await r.text()}`);
  await page.goto('/audit?action=message.resend');
  const target = page.locator('tr[data-action="message.resend"]').first().locator('[data-messages]');
  await target.waitFor();
  assert((await target.getAttribute('data-messages')) === '2', `target: ${await target.textContent()}`);
  const first = Math.min(...ids);
  await target.getByRole('link', { name: String(first), exact: true }).click();
  await heading(page, `Message ${first}`);
});

await check('the first Tab on the Overview reaches what needs attention, not "Drain engine…"', async () => {
  await page.goto('/');
  await heading(page, 'Overview');
  await page.getByRole('button', { name: 'Drain engine…' }).waitFor();
  // Each page load puts focus on its heading; the first Tab goes on from there.
  assert(await page.evaluate(() => document.activeElement?.id === 'page-title'), 'the heading is not focused');
  await page.keyboard.press('Tab');
  const first = await page.evaluate(() => {
    const a = document.activeElement;
    const drain = [...document.querySelectorAll('main button')].find((b) => b.textContent === 'Drain engine…');
    return {
      text: a?.textContent?.trim(),
      inMain: !!a?.closest('main'),
      beforeDrain: !!drain && !!(a.compareDocumentPosition(drain) & Node.DOCUMENT_POSITION_FOLLOWING),
    };
  });
  assert(first.inMain && first.beforeDrain, `the first Tab lands on "${first.text}" (${JSON.stringify(first)})`);
});

await check('the navigation column reaches the foot of a page longer than the screen', async () => {
  await page.setViewportSize({ width: 1280, height: 420 });
  await page.goto('/users');
  await heading(page, 'Users and tokens');
  await row(viewer.name).waitFor();
  const height = await page.evaluate(() => document.documentElement.scrollHeight);
  assert(height > 420 * 1.5, `the page is only ${height}px high`);
  // 4×4 pixels of the column, at its top and at the page's foot: the same.
  const at = (y) => page.screenshot({ fullPage: true, clip: { x: 3, y, width: 4, height: 4 } });
  const top = await at(3);
  const foot = await at(height - 8);
  assert(top.equals(foot), 'the column stops short of the foot');
  await page.setViewportSize({ width: 1280, height: 860 });
});

await check('no page error or CSP refusal', async () => {
  assert(problems.length === 0, problems.join('\n'));
});

// axe-core needs its source injected, which the console's CSP forbids: this
// context alone bypasses it.
{
  const { context, page: p } = await newPage(browser, base, { bypassCSP: true });
  const r = await p.request.post('/api/v1/sessions', { data: admin });
  assert(r.ok(), `sign-in for the axe checks: ${r.status()}`);
  for (const scheme of ['light', 'dark'])
    await check(`axe: Users and its role dialog, ${scheme}`, async () => {
      await p.emulateMedia({ colorScheme: scheme });
      await p.goto('/users');
      await heading(p, 'Users and tokens');
      await p.locator(`tr[data-user="${directoryUser}"]`).waitFor();
      await p.waitForFunction(() => !document.querySelector('[aria-busy="true"]'));
      await axe(p);
      await p.screenshot({ path: join(shots, `users-${scheme}.png`), fullPage: true });
      await p.locator(`tr[data-user="${viewer.name}"]`).getByRole('button', { name: 'Change role…' }).click();
      await p.getByRole('dialog').waitFor();
      await axe(p);
      await p.screenshot({ path: join(shots, `users-role-${scheme}.png`) });
      await p.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    });
  await context.close();
}

await browser.close();
finish();
