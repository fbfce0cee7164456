// The night shift's console in a real browser (tests/ui/console_test.cpp,
// Console.TheNightShift...): a receiver that is down ranks its interface
// first on the Overview with the receiver's error; the engine killed
// shows the disconnected banner, greys the page, and clears once the
// engine is started again; an edit with a broken payload refused in the
// editor, the original untouched. The harness kills and starts the engine when
// this script writes `kill` or `start` into DUCTUS_UI_CONTROL, and answers
// with `killed` / `started`.
// Prints a line per check and "N passed, M failed"; exits 1 on a failure.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assert, check, finish } from './checks.mjs';
import { readdirSync, statSync } from 'node:fs';
import { credentials, env, heading, launch, newPage, refused, sendHl7, signIn, until } from './harness.mjs';

const base = env('DUCTUS_UI_URL').replace(/\/$/, '');
const admin = credentials(env('DUCTUS_UI_ADMIN'));
const adtMllp = env('DUCTUS_UI_ADT_MLLP');
const labMllp = env('DUCTUS_UI_LAB_MLLP');
const multiMllp = env('DUCTUS_UI_MULTI_MLLP');
const outDir = env('DUCTUS_UI_OUT');
const files = (dir) => {
  try {
    return readdirSync(join(outDir, dir)).filter((f) => !f.startsWith('.')).length;
  } catch {
    return 0;
  }
};
const control = env('DUCTUS_UI_CONTROL');
const shots = env('DUCTUS_UI_SCREENSHOTS');
mkdirSync(shots, { recursive: true });
const run = Date.now().toString(36);

/** Asks the harness to kill or start the engine, and waits for it. */
async function engine(what) {
  const answer = what === 'kill' ? 'killed' : 'started';
  rmSync(join(control, answer), { force: true });
  writeFileSync(join(control, what), '');
  await until(`the harness to ${what} the engine`, async () => {
    if (existsSync(join(control, 'failed'))) throw new Error(`the engine did not ${what}`);
    return existsSync(join(control, answer));
  }, 60_000);
}

let seq = 0;
let lastControlId = '';
function hl7({ mrn, type = 'ADT^A01' }) {
  const controlId = `NS-${run}-${++seq}`;
  lastControlId = controlId;
  return [
    `MSH|^~\\&|NIGHT|WARD|LAB|HOSP|20260101120000||${type}|${controlId}|P|2.5`,
    'EVN|A01|20260101120000',
    `PID|1||${mrn}^^^HOSP^MR||Night^Jane||19800101|F`,
    'PV1|1|I|WARD^101^1',
  ].join('\r');
}

const browser = await launch();
const { page, problems } = await newPage(browser, base);

await check('admin signs in', async () => {
  await signIn(page, admin);
  await heading(page, 'Overview');
});

await check('keyboard: "g q" opens Quarantine and "g o" the Overview', async () => {
  await page.locator('body').press('g');
  await page.locator('body').press('q');
  await heading(page, 'Quarantine');
  await page.locator('body').press('g');
  await page.locator('body').press('o');
  await heading(page, 'Overview');
});

await check('with its receiver down and 60 waiting, lab is first on the Overview with the connection error', async () => {
  // adt: one message quarantined (no MRN), so a quarantine is there to be
  // outranked; and one delivered, for its timings.
  await sendHl7(adtMllp, hl7({ mrn: '' }));
  await sendHl7(adtMllp, hl7({ mrn: `A${run}` }));
  for (let i = 0; i < 60; i++) await sendHl7(labMllp, hl7({ mrn: `L${run}${i % 7}` }));
  await page.goto('/');
  await heading(page, 'Overview');
  const first = page.locator('[data-attention]').first();
  await until('lab → default first, failing, with 60 waiting', async () => {
    const who = await first.getAttribute('data-attention');
    const waiting = Number(((await first.locator('[data-count="waiting"]').textContent()) ?? '').replace(/[^0-9]/g, ''));
    return who === 'lab/default' && waiting === 60;
  });
  const error = (await first.locator('[data-cell="last-error"]').textContent()) ?? '';
  assert(/refused|connect/i.test(error), `the receiver's error is shown: "${error}"`);
  const state = (await first.locator('[data-cell="state"]').textContent()) ?? '';
  assert(/failing|stalled/.test(state), `lab is failing or stalled, not "${state}"`);
  await until('the head message and its attempts', async () => /attempt/.test((await first.locator('[data-cell="head"]').textContent()) ?? ''));
  // adt's quarantined delivery is listed too, below lab.
  const rows = await page.locator('[data-attention]').evaluateAll((els) => els.map((e) => e.getAttribute('data-attention')));
  assert(rows.indexOf('adt/default') > rows.indexOf('lab/default'), `order: ${rows.join(', ')}`);
  const firstInterface = await page.locator('tr[data-iface]').first().getAttribute('data-iface');
  assert(firstInterface === 'lab', `the interfaces table starts with ${firstInterface}`);
  await page.screenshot({ path: join(shots, 'overview-failing.png'), fullPage: true });
});

await check('Interfaces shows the failing receiver and the delivered one\'s p50 / p95', async () => {
  await page.getByRole('link', { name: 'Interfaces' }).click();
  await heading(page, 'Interfaces');
  await page.locator('[data-iface="lab"] [data-dest="default"] [data-failing="true"]').waitFor();
  await until("adt's timings", async () => /\d/.test((await page.locator('[data-iface="adt"] [data-dest="default"] [data-cell="latency"]').textContent()) ?? ''));
  await page.screenshot({ path: join(shots, 'interfaces-failing.png'), fullPage: true });
});

await check('the engine killed: every page says disconnected within 5 s and greys its badges', async () => {
  await page.getByRole('link', { name: 'Overview' }).click();
  await heading(page, 'Overview');
  await engine('kill');
  const banner = page.locator('[data-banner="disconnected"]');
  await banner.waitFor({ timeout: 5000 });
  const text = (await banner.textContent()) ?? '';
  assert(/^Disconnected since \d\d:\d\d:\d\d — data may be stale/.test(text), `the banner says "${text}"`);
  assert(!/TypeError|Failed to fetch/.test(await page.locator('main').textContent()), 'a JavaScript error is shown');
  assert((await page.locator('.shell.stale').count()) === 1, 'the page is not marked stale');
  // Another page says it too, at once.
  await page.getByRole('link', { name: 'Interfaces' }).click();
  await heading(page, 'Interfaces');
  await banner.waitFor();
  await page.getByText('Not live').waitFor();
  await page.screenshot({ path: join(shots, 'disconnected.png'), fullPage: true });
});

await check('the engine started again: the banner clears by itself and the counts come back', async () => {
  await engine('start');
  await page.locator('[data-banner="disconnected"]').waitFor({ state: 'detached' });
  assert((await page.locator('.shell.stale').count()) === 0, 'the page is still marked stale');
  await page.locator('[data-iface="lab"]').waitFor();
  await page.getByText('Live', { exact: true }).waitFor();
});

await check('the search box finds an MRN in every interface, and a number opens that message', async () => {
  await page.goto('/interfaces/lab/messages');
  await heading(page, 'Messages of lab');
  // adt's patient, looked for from lab's page.
  await page.locator('body').press('/');
  await page.keyboard.type(`A${run}`);
  await page.keyboard.press('Enter');
  await heading(page, `Messages matching A${run}`);
  const row = page.locator('tr[data-message]').first();
  await row.waitFor();
  assert((await row.locator('td').first().textContent()) === 'adt', 'the row names its interface adt');
  const id = await row.getAttribute('data-message');
  await page.getByRole('searchbox', { name: 'Find a message' }).fill(id);
  await page.keyboard.press('Enter');
  await heading(page, `Message ${id}`);
  await page.screenshot({ path: join(shots, 'search.png'), fullPage: true });
});

await check('"resend to" one chosen destination delivers there only', async () => {
  const m = hl7({ mrn: `M${run}` });
  await sendHl7(multiMllp, m);
  await until('both files', async () => files('one') === 1 && files('two') === 1);
  // multi has no ordering key: found by its control id.
  await page.goto(`/search?q=${lastControlId}`);
  const row = page.locator('tr[data-message]').first();
  await row.waitFor();
  const id = await row.getAttribute('data-message');
  await page.goto(`/messages/${id}`);
  await heading(page, `Message ${id}`);
  await page.locator('dd[data-status="sent"]').waitFor();
  await page.getByRole('button', { name: 'Resend to…' }).click();
  const dialog = page.getByRole('dialog');
  await page.screenshot({ path: join(shots, 'resend-to.png'), fullPage: true });
  // A resent file has the same name: two's is removed first, to see it come
  // back, and one's must not be written again.
  const oneFile = join(outDir, 'one', readdirSync(join(outDir, 'one'))[0]);
  const oneWritten = statSync(oneFile).mtimeMs;
  for (const f of readdirSync(join(outDir, 'two'))) rmSync(join(outDir, 'two', f));
  await dialog.getByRole('checkbox', { name: /two/ }).check();
  await dialog.getByLabel('Reason (kept in the audit log)').fill('two lost its copy');
  await dialog.getByRole('button', { name: 'Resend' }).click();
  await page.getByText(/delivery to two moved back to pending/).waitFor();
  await until("two's file written again", async () => files('two') === 1);
  await new Promise((r) => setTimeout(r, 1000));
  assert(statSync(oneFile).mtimeMs === oneWritten, "one's file was written again");
});

await check('an edit with a broken payload is refused in the editor, and the original stays as it was', async () => {
  await sendHl7(adtMllp, hl7({ mrn: '' }));
  const controlId = lastControlId;
  const id = await until('the message quarantined', async () => {
    const r = await page.request.get(`/api/v1/interfaces/adt/messages?control_id=${controlId}&status=quarantined`);
    return (await r.json()).items?.[0]?.id;
  });
  const count = async () => (await (await page.request.get('/api/v1/interfaces/adt/messages?limit=1')).json()).total?.count;
  const before = await count();
  await page.goto(`/messages/${id}`);
  await heading(page, `Message ${id}`);
  await page.getByRole('button', { name: 'Edit…' }).click();
  // No MSH: intake would refuse it.
  await page.getByRole('textbox', { name: 'Payload' }).fill('PID|1||X1^^^HOSP^MR||Broken^Jane');
  await page.getByRole('button', { name: /Save and deliver/ }).click();
  const refusal = page.getByRole('alert').filter({ hasText: 'no MSH segment' });
  await refusal.waitFor();
  await page.screenshot({ path: join(shots, 'edit-refused.png'), fullPage: true });
  assert(new URL(page.url()).pathname === `/messages/${id}`, `left for ${page.url()}`);
  assert((await page.getByRole('textbox', { name: 'Payload' }).inputValue()).startsWith('PID|1||X1'), 'the broken payload was not kept for fixing');
  const original = await (await page.request.get(`/api/v1/messages/${id}`)).json();
  assert(original.status === 'quarantined', `the original is ${original.status}`);
  assert((original.editedTo ?? []).length === 0, `the original names a copy: ${original.editedTo}`);
  assert(original.deliveries.every((d) => d.status === 'quarantined'), JSON.stringify(original.deliveries));
  assert((await count()) === before, 'a copy was stored');
});

await check("an interface's page: the chart counts this minute's messages, the configuration is shown", async () => {
  for (let i = 0; i < 3; i++) await sendHl7(adtMllp, hl7({ mrn: `C${run}${i}` }));
  await page.goto('/interfaces/adt');
  await heading(page, 'Interface adt');
  const chart = page.locator('figure[data-chart="hour"]');
  // Received counts at intake, sent once the file is written: a loaded
  // machine may show the first before the second.
  await until('3 received and 3 sent in the chart', async () => {
    await page.getByRole('button', { name: 'Last day' }).click();
    await page.getByRole('button', { name: 'Last hour' }).click();
    const received = Number(await chart.getAttribute('data-received'));
    const sent = Number(await chart.getAttribute('data-sent'));
    // Thrown, so that a timeout says what the chart showed last.
    if (received < 3 || sent < 3) throw new Error(`received ${received}, sent ${sent}`);
    return true;
  });
  await page.locator('[data-config="interface"]').getByText('PID.3.1').waitFor();
  await page.locator('[data-config-destination="default"]').waitFor();
  await page.screenshot({ path: join(shots, 'interface.png'), fullPage: true });
});

await check("stopping adt's intake closes its port, starting reopens it", async () => {
  await page.getByRole('button', { name: 'Stop intake…' }).click();
  let dialog = page.getByRole('dialog');
  await dialog.getByLabel('Reason').fill('sender sends garbage');
  await dialog.getByRole('button', { name: 'Stop intake' }).click();
  await page.locator('[data-intake="stopped"]').waitFor();
  await until('a connect to be refused', () => refused(adtMllp));
  await page.screenshot({ path: join(shots, 'interface-stopped.png'), fullPage: true });
  await page.getByRole('button', { name: 'Start intake…' }).click();
  dialog = page.getByRole('dialog');
  await dialog.getByRole('button', { name: 'Start intake' }).click();
  await page.locator('[data-intake="stopped"]').waitFor({ state: 'detached' });
  await until('an ACK on the reopened port', async () => {
    try {
      await sendHl7(adtMllp, hl7({ mrn: `R${run}` }));
      return true;
    } catch {
      return false;
    }
  });
});

await check('no page error or CSP refusal', async () => {
  assert(problems.length === 0, problems.join('\n'));
});

await browser.close();
finish();
