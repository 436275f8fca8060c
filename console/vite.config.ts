/**
 * The console's build: `npm run build` (scripts/build-console.ts) writes console/dist, which the
 * service serves at /console. Everything the page loads comes from there: no CDN, no inline script.
 */
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  // The SDK's TypeScript source, as everywhere in this repository (its dist/ is for npm users).
  resolve: { conditions: ['svc-source', 'module', 'browser', 'production'] },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The polyfill would be an inline script, which the console's CSP forbids; browsers the
    // console supports preload modules themselves.
    modulePreload: { polyfill: false },
    // Assets inlined as data: URLs would need a looser CSP; there are none worth it.
    assetsInlineLimit: 0,
    target: 'es2022',
    reportCompressedSize: false,
  },
  logLevel: 'warn',
});
