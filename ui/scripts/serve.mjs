// Serves dist/ as the engine does (the same CSP, unknown paths answered
// with index.html) and passes /api to an engine: for trying a build and
// running the browser test before the binary embeds it.
//   DUCTUS_API=http://127.0.0.1:17700 PORT=17800 node scripts/serve.mjs
import { createServer, request } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = resolve(dirname(fileURLToPath(import.meta.url)), '../dist');
const api = new URL(process.env.DUCTUS_API || 'http://127.0.0.1:7700');
const port = Number(process.env.PORT || 17800);
const csp =
  "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
};

createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname.startsWith('/api/')) {
    const up = request(
      { host: api.hostname, port: api.port, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode, { ...r.headers, 'content-security-policy': csp });
        r.pipe(res);
      },
    );
    up.on('error', (e) => {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'bad_gateway', message: String(e) }));
    });
    req.pipe(up);
    return;
  }
  let file = normalize(join(dist, decodeURIComponent(url.pathname)));
  if (!file.startsWith(dist)) file = join(dist, 'index.html');
  let body;
  try {
    body = await readFile(file);
  } catch {
    file = join(dist, 'index.html');
    body = await readFile(file);
  }
  res.writeHead(200, {
    'content-type': types[extname(file)] || 'application/octet-stream',
    'cache-control': url.pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
    'content-security-policy': csp,
  });
  res.end(body);
}).listen(port, '127.0.0.1', () => console.log(`serving ${dist} on http://127.0.0.1:${port}, /api → ${api}`));
