// Loaded with `node --import` into a child process (NODE_OPTIONS): appends to the file named by
// CUTOUT_MODULE_WATCH every @opentelemetry module the process loads, by import (a resolve hook)
// or by require (the require cache, read at exit). The tracing tests check that a server with
// tracing off loads none, and that the watch sees them when it is on.
import fs from 'node:fs';
import { createRequire, register } from 'node:module';

const out = process.env.CUTOUT_MODULE_WATCH;
if (out) {
  register('./module-watch-hooks.mjs', import.meta.url, { data: { out } });
  const require = createRequire(import.meta.url);
  process.on('exit', () => {
    const loaded = Object.keys(require.cache).filter((f) => f.includes(`${'/'}@opentelemetry${'/'}`));
    fs.appendFileSync(out, `exit\n${loaded.map((f) => `require ${f}\n`).join('')}`);
  });
}
