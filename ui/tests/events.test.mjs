// The Events page in a real browser (tests/ui/console_test.cpp,
// Console.TheEventsPage...): an AR refusal this script causes (a frame
// without an MSH) and a delivery given up after its retries (a receiver
// nobody runs) are on the page within seconds, filtered by kind through the
// form; the message id opens the message, the interface its page, which
// lists its last events too; axe-clean in both themes, a screenshot of
// each.
// Prints a line per check and "N passed, M failed"; exits 1 on a failure.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { assert, check, finish } from './checks.mjs';
import { axe, credentials, env, heading, launch, newPage, sendHl7, signIn, until } from './harness.mjs';

const base = env('DUCTUS_UI_URL').replace(/\/$/, '');
const admin = credentials(env('DUCTUS_UI_ADMIN'));
const adtMllp = env('DUCTUS_UI_ADT_MLLP');
const labMllp = env('DUCTUS_UI_LAB_MLLP');
const shots = env('DUCTUS_UI_SCREENSHOTS');
mkdirSync(shots, { recursive: true });
const run = Date.now().toString(36);

const browser = await launch();
const { page, problems } = await newPage(browser, base);

/** Waits until the page (read again) has no list loading. */
async function settled(p) {
  await p.waitForFunction(() => !document.querySelector('[aria-busy="true"]'));
}

await check('admin signs in and finds Events in the navigation', async () => {
  await signIn(page, admin);
  await heading(page, 'Overview');
  await page.getByRole('link', { name: 'Events', exact: true }).click();
  await heading(page, 'Events');
});

await check('an AR refusal and a delivery given up after its retries are on the page', async () => {
  // A frame without an MSH: the listener answers AR itself, storing nothing.
  const refused = await sendHl7(adtMllp, `PID|1||X${run}`).then(
    () => null,
    (e) => e.message,
  );
  assert(refused && /MSA\|AR/.test(refused), `the frame without an MSH got ${refused}`);
  // lab's receiver is down and it tries twice (1 s apart), then gives up.
  await sendHl7(labMllp, `MSH|^~\\&|EV|WARD|LAB|HOSP|20260101120000||ADT^A01|EV-${run}|P|2.5\rPID|1||L${run}^^^HOSP^MR`);
  await until('both on the page', async () => {
    await page.goto('/events');
    await heading(page, 'Events');
    await settled(page);
    return (await page.locator('tr[data-event="ar_refused"]').count()) > 0 && (await page.locator('tr[data-event="delivery_quarantined"]').count()) > 0;
  });
  const text = (await page.locator('tr[data-event="ar_refused"]').first().textContent()) ?? '';
  assert(/answered AR/.test(text) && /no MSH/i.test(text), `the refusal says why: ${text}`);
  await page.screenshot({ path: join(shots, 'events.png'), fullPage: true });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: join(shots, 'events-dark.png'), fullPage: true });
  await page.emulateMedia({ colorScheme: 'light' });
});

await check('filtered by kind through the form, its message id opens the message', async () => {
  await page.getByLabel('What').selectOption('delivery_quarantined');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/kind=delivery_quarantined/);
  await settled(page);
  const kinds = await page.locator('tr[data-event]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event')));
  assert(kinds.length === 1 && kinds[0] === 'delivery_quarantined', `filtered rows: ${kinds.join(', ')}`);
  const row = page.locator('tr[data-event="delivery_quarantined"]');
  assert(/gave up after 2 attempts/.test((await row.textContent()) ?? ''), 'the row says it gave up');
  const link = row.getByRole('link', { name: /^\d+$/ });
  const id = (await link.textContent()) ?? '';
  await link.click();
  await heading(page, `Message ${id}`);
});

await check("the interface is a link to its page, which lists its last events", async () => {
  await page.goto('/events?interface=adt');
  await heading(page, 'Events');
  await settled(page);
  assert((await page.locator('tr[data-event="delivery_quarantined"]').count()) === 0, "lab's event is not adt's");
  await page.locator('tr[data-event="ar_refused"]').first().getByRole('link', { name: 'adt' }).click();
  await heading(page, 'Interface adt');
  await page.locator('section[aria-labelledby="events-h"] tr[data-event="ar_refused"]').first().waitFor();
  await page.screenshot({ path: join(shots, 'interface-events.png'), fullPage: true });
});

await check('axe: Events, light and dark', async () => {
  // axe-core needs its source injected, which the console's CSP forbids:
  // this context alone bypasses it.
  const { context, page: p } = await newPage(browser, base, { bypassCSP: true });
  const r = await p.request.post('/api/v1/sessions', { data: admin });
  assert(r.ok(), `sign-in for the axe checks: ${r.status()}`);
  for (const scheme of ['light', 'dark']) {
    await p.emulateMedia({ colorScheme: scheme });
    await p.goto('/events');
    await heading(p, 'Events');
    await p.locator('tr[data-event]').first().waitFor();
    await settled(p);
    try {
      await axe(p);
    } catch (e) {
      throw new Error(`${scheme}: ${e.message}`);
    }
    // The badges carry meaning in a word and a colour: AAA contrast (7:1).
    const aaa = await p.evaluate(() => window.axe.run({ include: [['.badge']] }, { runOnly: { type: 'rule', values: ['color-contrast-enhanced'] } }));
    assert(aaa.violations.length === 0, `${scheme} badges: ` + aaa.violations.map((v) => v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')).join('; '));
  }
  await context.close();
});

await check('no page error or CSP refusal', async () => {
  assert(problems.length === 0, problems.join('\n'));
});

await browser.close();
finish();
