/**
 * What `npm pack` publishes (issue 53): the library and the CLI, never the benches (bench/ at the
 * root, compiled into dist-bench/ for a clone's `npm run bench...`) nor the tests.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { ROOT } from './helpers/cli.js';

t.test('the packed file list: dist/ and bin, no bench and no test', async (t) => {
  const pack = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  t.equal(pack.status, 0, `npm pack --dry-run (${pack.stderr.split('\n').find((l) => /ERR/.test(l)) ?? 'ok'})`);
  const files = (JSON.parse(pack.stdout) as { files: { path: string }[] }[])[0].files.map((f) => f.path);
  t.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts') && files.includes('bin/cutout'), 'the library, its declarations and the CLI are in it');
  t.same(files.filter((f) => /(^|\/)(bench|dist-bench|test)(\/|$)/.test(f)), [], 'no bench, dist-bench or test file is in it');
});
