/**
 * Usage errors exit with 2 and their message, every time (issue 37): the CLI starts the model's
 * worker thread early when the arguments ask for a cutout, and a process that exited while that
 * thread was still loading onnxruntime aborted natively (exit 134, "terminate called after
 * throwing an instance of 'Napi::Error'") in about 1 run in 20. Each usage error runs several
 * times, two at a time (the abort came from a race, so one run proves little).
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FIXTURES, runCli } from '../helpers/cli.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-usage-errors-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
// Without tap's process instrumentation (NODE_OPTIONS): each run starts as a user's does, and faster.
const env = { CUTOUT_HOME: path.join(dir, 'home'), NODE_OPTIONS: '' };
const photo = path.join(FIXTURES, 'astronaut.jpg');
const badValue = path.join(dir, 'bad-value.json');
fs.writeFileSync(badValue, JSON.stringify({ quality: 'quick' }));
fs.mkdirSync(path.join(dir, 'project'));
const trailingComma = path.join(dir, 'project', '.cutoutrc.json');
fs.writeFileSync(trailingComma, '{\n  "quality": "fast",\n}\n');

const RUNS_EACH = 6;
const cases: { name: string; args: string[]; message: RegExp }[] = [
  { name: 'a bad --quality', args: [photo, '--quality', 'quick'], message: /--quality but received "quick"/ },
  { name: 'a bad --format', args: [photo, '--format', 'tiff'], message: /--format/ },
  { name: 'a bad --bg-color', args: [photo, '--bg-color', 'notacolour'], message: /--bg-color/ },
  { name: 'a bad --alpha', args: [photo, '--alpha', 'medium'], message: /--alpha/ },
  { name: 'a bad --size', args: [photo, '--size', 'huge'], message: /--size/ },
  { name: '--concurrency 0', args: [photo, '--concurrency', '0'], message: /concurrency/ },
  { name: 'a non-number --inference-workers', args: [photo, '--inference-workers', 'two'], message: /inference-workers|inferenceWorkers/ },
  { name: 'a bad value in the config file', args: [photo, '--config', badValue], message: /quality.*quick|quick.*quality/ },
  { name: 'a syntax error in the config file', args: [photo, '--config', trailingComma], message: /\.cutoutrc\.json: Expected double-quoted property name at line 3, column 1/ },
];

for (const c of cases) {
  t.test(`${c.name}: exit 2 and its message, ${RUNS_EACH} runs, never a native abort`, async (t) => {
    for (let i = 0; i < RUNS_EACH; i += 2) {
      const pair = await Promise.all([runCli(c.args, { cwd: dir, env }), runCli(c.args, { cwd: dir, env })]);
      for (const r of pair) {
        t.notMatch(r.stderr, /terminate called|Napi::Error|Aborted/, 'no native abort');
        t.equal(r.code, 2, `exit 2 (stderr: ${r.stderr.trim()})`);
        t.match(r.stderr, c.message);
        t.equal(r.stderr.trim().split('\n').length, 1, 'one line on stderr');
      }
    }
  });
}

t.test('a mistyped command stops everything: exit 2, a suggestion when one is close, nothing written', async (t) => {
  const photos = path.join(dir, 'photos');
  fs.mkdirSync(photos);
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(photos, 'coffee.jpg'));
  const [watch, serv, flagsFirst] = await Promise.all([
    runCli(['watch', 'photos/'], { cwd: dir, env }),
    runCli(['serv', 'photos', '--quality', 'fast'], { cwd: dir, env }),
    runCli(['--quality', 'fast', 'wacth', 'photos'], { cwd: dir, env }),
  ]);
  t.equal(watch.code, 2, watch.stderr);
  t.match(watch.stderr, /^cutout: unknown command 'watch', and no file or folder of that name; see cutout --help\n$/);
  t.equal(serv.code, 2, serv.stderr);
  t.match(serv.stderr, /unknown command 'serv' \(did you mean serve\?\)/);
  t.equal(flagsFirst.code, 2, flagsFirst.stderr);
  t.match(flagsFirst.stderr, /unknown command 'wacth'/);
  t.same(fs.readdirSync(photos), ['coffee.jpg'], 'no cutout written');
});

t.test('a missing file that reads as a path is still "No such file"; after `remove`, any word is an input', async (t) => {
  const [dotted, slashed, afterRemove] = await Promise.all([
    runCli(['nophoto.jpg'], { cwd: dir, env }),
    runCli(['./nophoto'], { cwd: dir, env }),
    runCli(['remove', 'watch'], { cwd: dir, env }),
  ]);
  for (const [r, name] of [[dotted, 'nophoto.jpg'], [slashed, './nophoto'], [afterRemove, 'watch']] as const) {
    t.notMatch(r.stderr, /unknown command/, name);
    t.match(r.stderr, new RegExp(`${name.replace('.', '\\.')}: No such file`), name);
    t.equal(r.code, 1, `${name}: an input that failed`);
  }
});
