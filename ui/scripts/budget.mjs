// The size budget, after `npm run build`: a first visit (index.html and every
// script, module preload and stylesheet it names) at most 300 KB gzipped,
// every other chunk at most 50 KB gzipped. Prints a table; exits 1 on a breach.
import { readFileSync, readdirSync } from 'node:fs';
import { gzipSync, constants } from 'node:zlib';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const KB = 1024;
const FIRST_VISIT = 300 * KB;
const CHUNK = 50 * KB;

const dist = resolve(dirname(fileURLToPath(import.meta.url)), '../dist');
const gz = (buf) => gzipSync(buf, { level: constants.Z_BEST_COMPRESSION }).length;

let html;
try {
  html = readFileSync(join(dist, 'index.html'));
} catch {
  console.error(`no ${dist}/index.html: run npm run build first`);
  process.exit(1);
}

// What index.html makes the browser fetch at once.
const first = new Set();
const text = html.toString('utf8');
for (const tag of text.match(/<(script|link)\b[^>]*>/gi) ?? []) {
  const isScript = /^<script/i.test(tag);
  const rel = /\brel=["']?([^"'\s>]+)/i.exec(tag)?.[1]?.toLowerCase();
  if (!isScript && rel !== 'stylesheet' && rel !== 'modulepreload') continue;
  const ref = /\b(?:src|href)=["']?([^"'\s>]+)/i.exec(tag)?.[1];
  if (ref && ref.startsWith('/') && !ref.startsWith('//')) first.add(ref.slice(1));
}

const rows = [['index.html', html.length, gz(html), 'first']];
const assets = readdirSync(join(dist, 'assets')).filter((f) => /\.(js|css)$/.test(f)).sort();
for (const f of assets) {
  const buf = readFileSync(join(dist, 'assets', f));
  rows.push([`assets/${f}`, buf.length, gz(buf), first.has(`assets/${f}`) ? 'first' : 'lazy']);
}
for (const ref of first)
  if (!rows.some((r) => r[0] === ref)) {
    console.error(`index.html names ${ref}, which is not in dist/assets`);
    process.exit(1);
  }

const firstTotal = rows.filter((r) => r[3] === 'first').reduce((n, r) => n + r[2], 0);
const breaches = [];
if (firstTotal > FIRST_VISIT) breaches.push(`first visit ${firstTotal} B gzipped > ${FIRST_VISIT} B`);
for (const [name, , gzipped, load] of rows)
  if (load === 'lazy' && gzipped > CHUNK) breaches.push(`${name}: ${gzipped} B gzipped > ${CHUNK} B`);

const pad = (s, n, right) => (right ? String(s).padStart(n) : String(s).padEnd(n));
const w = Math.max(...rows.map((r) => r[0].length), 4);
console.log(`${pad('file', w)}  ${pad('load', 5)}  ${pad('bytes', 9, true)}  ${pad('gzipped', 9, true)}`);
for (const [name, bytes, gzipped, load] of rows)
  console.log(`${pad(name, w)}  ${pad(load, 5)}  ${pad(bytes, 9, true)}  ${pad(gzipped, 9, true)}`);
const largestLazy = Math.max(0, ...rows.filter((r) => r[3] === 'lazy').map((r) => r[2]));
console.log(
  `first visit: ${firstTotal} B gzipped (budget ${FIRST_VISIT}); largest other chunk: ${largestLazy} B gzipped (budget ${CHUNK})`,
);
if (breaches.length) {
  for (const b of breaches) console.error(`over budget: ${b}`);
  process.exit(1);
}
