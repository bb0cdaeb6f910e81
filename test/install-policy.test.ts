/**
 * Issue 51: a clone installs with the npm that Node 20 and 22 ship (10.9), which ignores
 * package.json's allowScripts and runs onnxruntime-node's install script, whose default on Linux x64
 * downloads CUDA libraries from NuGet. The clone's .npmrc hands that script its own skip setting
 * (`npm_config_onnxruntime_node_install`). Here the script itself is run as npm runs a script in
 * this clone, with nothing in the environment saying skip and every download pointed at a closed
 * port: it must end at once, successfully, without trying NuGet. (.ci/run installs the clone with
 * npm 10 for the whole route.)
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ROOT } from './helpers/cli.js';

const INSTALL_SCRIPT = path.join(ROOT, 'node_modules', 'onnxruntime-node', 'script', 'install.js');

/** The caller's environment without anything that already says skip (npm test itself sets it from .npmrc). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/onnxruntime_node_install/i.test(k) || /^npm_/i.test(k)) continue;
    env[k] = v;
  }
  // global-agent (which the script bootstraps) sends every request here: a closed port, so a
  // download that should not happen fails fast instead of reaching the internet.
  env.GLOBAL_AGENT_HTTP_PROXY = 'http://127.0.0.1:9';
  return env;
}

t.test('package.json denies the script to npm 11 (allowScripts); .npmrc skips it for npm 10', async (t) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { allowScripts: Record<string, boolean> };
  t.equal(pkg.allowScripts['onnxruntime-node'], false, 'allowScripts denies onnxruntime-node');
  const npmrc = fs.readFileSync(path.join(ROOT, '.npmrc'), 'utf8');
  t.match(npmrc, /^onnxruntime-node-install=skip$/m, '.npmrc says skip');
});

t.test("onnxruntime-node's install script, run by npm in the clone, skips the NuGet download", { skip: !fs.existsSync(INSTALL_SCRIPT) && 'onnxruntime-node is not installed' }, async (t) => {
  // npm exec gives the script the clone's configuration as npm gives it to a lifecycle script; its
  // npm_package_json is then pointed at the dependency's own, as when npm runs a dependency's
  // script (the script exits early when it is the root project's own install).
  const asDependency = `process.env.npm_package_json = ${JSON.stringify(path.join(path.dirname(path.dirname(INSTALL_SCRIPT)), 'package.json'))}; require(${JSON.stringify(INSTALL_SCRIPT)})`;
  const run = spawnSync('npm', ['exec', '--offline', '--', 'node', '-e', asDependency], { cwd: ROOT, env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
  t.equal(run.status, 0, `the script exits 0 (${(run.stderr || '').split('\n').find((l) => /Error/.test(l))?.trim() ?? 'no error'})`);
  t.notMatch(`${run.stdout}${run.stderr}`, /nuget|Downloading/i, 'nothing was downloaded or attempted');

  // The control: the same script without the clone's setting would go to NuGet (and fail on the
  // closed proxy here), so the check above is the setting's doing.
  const bare = spawnSync(process.execPath, ['-e', asDependency], { cwd: ROOT, env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
  t.not(bare.status, 0, 'without the setting the script tries the download and fails');
});
