// The docs site in a real browser (issue #37): the site scripts/docs.sh
// built into DUCTUS_DOCS_SITE, read twice as its readers will: served over
// HTTP by this script's own static server (a port the system picks), and
// opened from disk (file://), as the unpacked offline zip is. Each time,
// "quarantine" typed into the search box lists pages that say it, among
// them the troubleshooting guide's Quarantine section; the first result
// opens, and its page says it too. No request leaves the site (no CDN, no
// web fonts) and no page logs an error. Screenshots: docs-search.png,
// docs-search-file.png, docs-result.png.
//
// Run by tests/ui/docs_test.cpp.
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { assert, check, finish } from './checks.mjs';
import { env, launch, until } from './harness.mjs';

const site = resolve(env('DUCTUS_DOCS_SITE'));
const shots = env('DUCTUS_UI_SCREENSHOTS');

const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.ico': 'image/x-icon',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.eot': 'application/vnd.ms-fontobject',
};

// Any static server: files as they are, nothing else.
const server = createServer(async (req, res) => {
  const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  const file = resolve(join(site, path.endsWith('/') ? path + 'index.html' : path));
  if (file !== site && !file.startsWith(site + sep)) {
    res.writeHead(403).end();
    return;
  }
  try {
    const body = await readFile(file);
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }).end(body);
  } catch {
    res.writeHead(404).end('not found');
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const httpBase = `http://127.0.0.1:${server.address().port}/`;
const fileBase = pathToFileURL(site + sep).href;
console.log(`serving ${site} on ${httpBase}`);

/** The text of the page a search result names, as its reader gets it. */
async function pageText(href) {
  const url = new URL(href);
  url.hash = '';
  if (url.protocol === 'file:') return readFile(fileURLToPath(url), 'utf8');
  const r = await fetch(url);
  assert(r.ok, `${url}: ${r.status}`);
  return r.text();
}

const browser = await launch();

async function searchFrom(base, shot) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const foreign = [];
  const errors = [];
  page.on('request', (r) => {
    if (!r.url().startsWith(base) && !r.url().startsWith('data:')) foreign.push(r.url());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });

  await page.goto(base + 'index.html');
  await page.getByRole('heading', { level: 1, name: 'Ductus' }).waitFor();
  // The navigation bar's Search opens the search dialog.
  await page.locator('a[data-target="#mkdocs_search_modal"]').click();
  const box = page.locator('#mkdocs-search-query');
  await box.waitFor({ state: 'visible' });
  await box.pressSequentially('quarantine', { delay: 20 });
  const links = page.locator('#mkdocs-search-results article h3 a');
  await until('search results', async () => (await links.count()) > 0);
  const results = await links.evaluateAll((as) => as.map((a) => ({ href: a.href, title: a.textContent })));
  console.log(`${base}: ${results.length} results, first: ${results.slice(0, 4).map((r) => r.title).join(', ')}`);
  await page.screenshot({ path: join(shots, shot) });

  assert(
    results.some((r) => r.href === `${base}operating/stuck-feed.html#quarantine`),
    `no result links to operating/stuck-feed.html#quarantine: ${results.map((r) => r.href).join(' ')}`,
  );
  for (const r of results.slice(0, 10)) {
    assert(r.href.startsWith(base), `a result outside the site: ${r.href}`);
    assert(/quarantin/i.test(await pageText(r.href)), `${r.href} ("${r.title}") does not say quarantine`);
  }

  // The first result opens at its section, and its page says it too.
  const first = results[0];
  await links.first().click();
  await page.waitForURL(first.href);
  await page.locator('div[role="main"] h1').first().waitFor();
  const fragment = new URL(first.href).hash.slice(1);
  if (fragment) assert((await page.locator(`[id="${fragment}"]`).count()) === 1, `no #${fragment} on ${first.href}`);
  assert(/quarantin/i.test(await page.locator('div[role="main"]').innerText()), `${first.href} does not say quarantine`);

  assert(foreign.length === 0, `requests that left the site: ${foreign.join(' ')}`);
  assert(errors.length === 0, `errors on the page: ${errors.join(' | ')}`);
  return { page, context };
}

await check('over HTTP, searching "quarantine" finds the pages that say it, and a result opens', async () => {
  const { page, context } = await searchFrom(httpBase, 'docs-search.png');
  await page.screenshot({ path: join(shots, 'docs-result.png') });
  await context.close();
});

await check('from disk (file://, the unpacked zip), the same search works with no server', async () => {
  const { context } = await searchFrom(fileBase, 'docs-search-file.png');
  await context.close();
});

await check('a search named in the address (?q=) shows its results when the page opens', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${httpBase}operating/retention.html?q=handover`);
  const links = page.locator('#mkdocs-search-results article h3 a');
  await until('search results', async () => (await links.count()) > 0);
  const hrefs = await links.evaluateAll((as) => as.map((a) => a.href));
  assert(hrefs.some((h) => h.startsWith(`${httpBase}operating/handover.html`)), `no result for the handover guide: ${hrefs.join(' ')}`);
  await context.close();
});

await browser.close();
server.close();
finish();
