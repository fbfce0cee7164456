// Acting on every match in a real browser (tests/ui/console_test.cpp,
// Console.ActsOnEveryMatch...): 620 messages quarantined because their
// receiver is down; "Resend all…" on Quarantine over every page; the
// receiver started and "Resend all matching…" on the messages list, in
// batches of 500 with its progress, every message then delivered; an
// export downloads a CSV whose rows are the list's; the editor's Try shows
// a destination's output before saving, and intake's refusal; the
// Overview says when a failing head message is tried again. axe-core on
// each in both themes. The harness gives the port the receiver is to
// listen on (DUCTUS_UI_LAB_PORT).
// Prints a line per check and "N passed, M failed"; exits 1 on a failure.
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { assert, check, finish } from './checks.mjs';
import { axe, credentials, env, heading, launch, newPage, sendHl7, signIn, until } from './harness.mjs';

const base = env('DUCTUS_UI_URL').replace(/\/$/, '');
const admin = credentials(env('DUCTUS_UI_ADMIN'));
const feedMllp = env('DUCTUS_UI_FEED_MLLP');
const slowMllp = env('DUCTUS_UI_SLOW_MLLP');
const labPort = Number(env('DUCTUS_UI_LAB_PORT'));
const shots = env('DUCTUS_UI_SCREENSHOTS');
mkdirSync(shots, { recursive: true });
const run = Date.now().toString(36);
const COUNT = 620; // more than a page of 50, more than a resend call's 500

let seq = 0;
function hl7({ mrn, family = 'Bulk' }) {
  const controlId = `BK-${run}-${++seq}`;
  return [
    `MSH|^~\\&|BULK|WARD|LAB|HOSP|20260101120000||ADT^A01|${controlId}|P|2.5`,
    'EVN|A01|20260101120000',
    `PID|1||${mrn}^^^HOSP^MR||${family}^Jane||19800101|F`,
    'PV1|1|I|WARD^101^1',
  ].join('\r');
}

// The lab system, once it is up: answers AA to each frame, counting the
// control ids it saw.
const received = new Set();
function startReceiver() {
  const server = createServer((socket) => {
    let got = Buffer.alloc(0);
    socket.on('data', (d) => {
      got = Buffer.concat([got, d]);
      for (;;) {
        const start = got.indexOf(0x0b);
        const end = got.indexOf(Buffer.from([0x1c, 0x0d]));
        if (start < 0 || end < 0) return;
        const message = got.subarray(start + 1, end).toString('latin1');
        got = got.subarray(end + 2);
        const control = message.split('\r')[0].split('|')[9] ?? '';
        received.add(control);
        const ack = `MSH|^~\\&|LAB|HOSP|BULK|WARD|20260101120000||ACK|A${control}|P|2.5\rMSA|AA|${control}\r`;
        socket.write(Buffer.concat([Buffer.from([0x0b]), Buffer.from(ack, 'latin1'), Buffer.from([0x1c, 0x0d])]));
      }
    });
    socket.on('error', () => {});
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(labPort, '127.0.0.1', () => resolve(server));
  });
}

/** RFC 4180 read back: rows of fields. */
function readCsv(text) {
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
  }
  return rows;
}

/** axe in both themes on the page as it stands (the system's scheme: the
 * console follows it while the user chose none). */
async function axeBoth(p, what) {
  for (const scheme of ['light', 'dark']) {
    await p.emulateMedia({ colorScheme: scheme });
    try {
      await axe(p);
    } catch (e) {
      throw new Error(`axe, ${what}, ${scheme}: ${e.message}`);
    }
  }
  await p.emulateMedia({ colorScheme: 'light' });
}

async function total(p, query) {
  const r = await p.request.get(`/api/v1/interfaces/feed/messages?limit=1&${query}`);
  assert(r.ok(), `the list answered ${r.status()}`);
  return (await r.json()).total.count;
}

const browser = await launch();
// axe-core's source is injected: this context bypasses the console's CSP
// (tests/ui's console test checks the CSP holds).
const { page } = await newPage(browser, base, { bypassCSP: true, acceptDownloads: true });

await check('admin signs in', async () => {
  await signIn(page, admin);
  await heading(page, 'Overview');
});

await check(`${COUNT} messages quarantined while their receiver is down`, async () => {
  for (let i = 0; i < COUNT; i++) await sendHl7(feedMllp, hl7({ mrn: `B${run}${i % 9}` }));
  await until(`${COUNT} quarantined`, async () => (await total(page, 'status=quarantined')) === COUNT, 60_000);
});

await check('Quarantine: "Resend all…" acts on every page, not only the 100 shown', async () => {
  await page.goto('/quarantine?interface=feed');
  await heading(page, 'Quarantine');
  await page.locator('tr[data-message]').first().waitFor();
  assert((await page.locator('tr[data-message]').count()) === 100, 'a page shows 100');
  await page.getByRole('button', { name: 'Resend all…' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByText('on every page').waitFor();
  await axeBoth(page, 'Quarantine, resend all');
  await dialog.getByLabel('Reason (kept in the audit log)').fill('lab back soon');
  await dialog.getByRole('button', { name: 'Resend all' }).click();
  const summary = page.locator('[data-bulk-summary="done"]');
  await summary.waitFor({ timeout: 60_000 });
  const text = (await summary.textContent()) ?? '';
  assert(text.includes(`${COUNT} messages resent`), `the summary says "${text}"`);
  await page.screenshot({ path: join(shots, 'quarantine-resend-all.png') });
  await page.getByRole('button', { name: 'Close' }).click();
  await page.getByText(`${COUNT} messages resent`).waitFor();
  // The receiver is still down: back in quarantine, each after one more try.
  await until(`${COUNT} quarantined again`, async () => (await total(page, 'status=quarantined')) === COUNT, 60_000);
  const rows = await page.request.get(`/api/v1/audit?action=message.resend&limit=10`);
  assert(rows.ok(), `the audit log answered ${rows.status()}`);
  const resends = (await rows.json()).items.filter((r) => r.detail?.reason === 'lab back soon');
  assert(resends.length === 2, `two calls of at most 500, each audited with its reason: ${resends.length}`);
});

const receiver = await startReceiver();

await check('messages list: "Resend all matching…" resends the filter\'s messages 500 at a time, with progress', async () => {
  await page.goto('/interfaces/feed/messages?status=quarantined');
  await heading(page, 'Messages of feed');
  await page.locator('[data-total]').waitFor();
  assert((await page.locator('tr[data-message]').count()) === 50, 'a page shows 50');
  await page.getByRole('button', { name: 'Resend all matching…' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByText(`${COUNT} messages match this filter`).waitFor();
  await dialog.getByRole('radio', { name: /To these destinations/ }).check();
  await dialog.getByRole('checkbox', { name: 'lab' }).check();
  await dialog.getByLabel('Reason (kept in the audit log)').fill('lab is back');
  await page.screenshot({ path: join(shots, 'resend-all-matching.png') });
  await axeBoth(page, 'messages, resend all matching');
  // Each call held a while, to see the progress between them.
  await page.route('**/api/v1/messages/resend', async (route) => {
    await new Promise((r) => setTimeout(r, 1500));
    await route.continue();
  });
  await dialog.getByRole('button', { name: 'Resend all' }).click();
  const progress = page.locator('[data-bulk-progress]');
  await until('500 of 620 resent', async () => (await progress.getAttribute('data-bulk-progress')) === `500/${COUNT}`);
  const said = (await progress.textContent()) ?? '';
  assert(said.startsWith(`500 of ${COUNT} resent`), `the progress says "${said}"`);
  await page.screenshot({ path: join(shots, 'resend-all-progress.png') });
  await axeBoth(page, 'bulk progress');
  await page.locator('[data-bulk-summary="done"]').waitFor({ timeout: 60_000 });
  await page.unroute('**/api/v1/messages/resend');
  const summary = (await page.locator('[data-bulk-summary]').textContent()) ?? '';
  assert(summary.includes(`${COUNT} messages resent (${COUNT} deliveries)`), `the summary says "${summary}"`);
  await page.screenshot({ path: join(shots, 'resend-all-done.png') });
  await axeBoth(page, 'bulk summary');
  await page.getByRole('button', { name: 'Close' }).click();
  await until(`the receiver to have all ${COUNT}`, async () => received.size === COUNT, 60_000);
  await until('none quarantined', async () => (await total(page, 'status=quarantined')) === 0);
});

await check('Export… downloads a CSV whose rows are the list\'s, payloads included', async () => {
  await page.goto('/interfaces/feed/messages');
  await heading(page, 'Messages of feed');
  await page.locator('[data-total]').waitFor();
  await page.getByRole('button', { name: 'Export…' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('radio', { name: /CSV/ }).check();
  await dialog.getByRole('checkbox', { name: /Include each payload/ }).check();
  await page.screenshot({ path: join(shots, 'export.png') });
  await axeBoth(page, 'export dialog');
  const [download] = await Promise.all([page.waitForEvent('download'), dialog.getByRole('button', { name: 'Download' }).click()]);
  assert(download.suggestedFilename() === 'feed-messages.csv', download.suggestedFilename());
  const rows = readCsv(readFileSync(await download.path(), 'utf8'));
  const head = rows.shift();
  assert(head.join(',') === 'id,interface,received_at,status,type,control_id,key,last_error,origin_id,duplicate_of,edited_from,deliveries,delivery_errors,payload_encoding,charset,payload', head.join(','));
  // The list's ids, newest first, page after page.
  const ids = [];
  for (let before = ''; ; ) {
    const r = await (await page.request.get(`/api/v1/interfaces/feed/messages?limit=500${before}`)).json();
    ids.push(...r.items.map((m) => String(m.id)));
    if (r.next === null) break;
    before = `&before=${r.next}`;
  }
  assert(rows.length === ids.length && ids.length === COUNT, `${rows.length} rows, ${ids.length} listed`);
  assert(rows.every((r, i) => r[0] === ids[i]), 'the rows are the list\'s, in its order');
  const first = rows[0];
  assert(first[3] === 'sent' && first[11] === 'lab=sent/3', `status ${first[3]}, deliveries ${first[11]}`);
  assert(first[15].startsWith('MSH|^~\\&|BULK') && first[15].includes('\rPID|'), 'the payload, its segments ending in CR');
});

await check("the editor's Try shows the destination's output before saving, and intake's refusal", async () => {
  await sendHl7(feedMllp, hl7({ mrn: 'BAD', family: 'Tryme' }));
  let id;
  await until('the BAD message quarantined', async () => {
    const r = await (await page.request.get('/api/v1/interfaces/feed/messages?status=quarantined&limit=1')).json();
    id = r.items[0]?.id;
    return id !== undefined;
  });
  await page.goto(`/messages/${id}`);
  await heading(page, `Message ${id}`);
  await page.getByRole('button', { name: 'Edit…' }).click();
  const payload = page.locator('textarea[name="payload"]');
  await payload.fill((await payload.inputValue()).replace('|BAD^', '|GOOD7^'));
  await page.getByRole('button', { name: 'Try', exact: true }).click();
  const lab = page.locator('[data-try-destination="lab"]');
  await lab.waitFor();
  assert((await lab.getAttribute('data-outcome')) === 'sent', `lab: ${await lab.getAttribute('data-outcome')}`);
  const output = (await lab.textContent()) ?? '';
  assert(output.includes('TRYME') && output.includes('GOOD7'), `the transform's output: ${output.slice(0, 200)}`);
  assert(received.size === COUNT, 'a dry run sends nothing');
  await page.screenshot({ path: join(shots, 'edit-try.png'), fullPage: true });
  await axeBoth(page, 'editor with a dry run');
  // What intake would refuse: said by Try, and refused inline by Save.
  await payload.fill('not an HL7 message');
  await page.getByRole('button', { name: 'Try', exact: true }).click();
  await page.locator('[data-tried="refused"]').waitFor();
  await page.getByRole('button', { name: 'Save and deliver the copy' }).click();
  await page.locator('#edit-error [role="alert"]').waitFor();
  assert((await payload.getAttribute('aria-invalid')) === 'true', 'the payload is marked invalid');
  await page.screenshot({ path: join(shots, 'edit-refused.png'), fullPage: true });
  await page.reload();
  await page.locator('dd[data-status="quarantined"]').waitFor();
});

await check('the Overview says when a failing head message is tried again', async () => {
  await sendHl7(slowMllp, hl7({ mrn: `S${run}` }));
  await page.goto('/');
  await heading(page, 'Overview');
  const row = page.locator('[data-attention="slow/default"]');
  await row.waitFor();
  const retry = row.locator('[data-next-retry]');
  await until('"next retry in N s"', async () => /^(next retry in \d+ (s|min)|retrying now)$/.test(((await retry.textContent({ timeout: 1000 })) ?? '').trim()), 60_000);
  const at = Date.parse(await retry.getAttribute('data-next-retry'));
  assert(at > Date.now() - 5000 && at < Date.now() + 61_000, `the next retry is within the back-off: ${new Date(at).toISOString()}`);
  await page.screenshot({ path: join(shots, 'overview-next-retry.png'), fullPage: true });
  await axeBoth(page, 'Overview with a retry due');
});

receiver.close();
await browser.close();
finish();
