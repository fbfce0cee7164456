import { defineConfig } from 'vite';

// The engine serves dist/ itself (embedded in the binary) under a CSP that
// allows only our own files: no inline script or style, and no
// modulepreload polyfill (it is an inline script).
export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    target: 'es2022',
    outDir: 'dist',
    assetsDir: 'assets',
    modulePreload: { polyfill: false },
    cssCodeSplit: true,
    sourcemap: false,
    reportCompressedSize: false,
  },
  server: {
    // `npm run dev` against an engine: DUCTUS_API=http://127.0.0.1:17700
    proxy: { '/api': { target: process.env.DUCTUS_API || 'http://127.0.0.1:7700' } },
  },
});
