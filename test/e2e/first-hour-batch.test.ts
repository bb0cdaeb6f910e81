/**
 * The first hour of a batch user, round three (issue 42), through the real bin/cutout and the real
 * model: the output folder inside the input folder is never an input (plain and --recursive, and
 * on a rerun); a shell's `*.jpg` that names yesterday's cutouts does not cut out cutouts; a plain
 * rerun of a finished folder says which flags to use; a run begun without --manifest is taken over
 * by one (its outputs adopted), and --force redoes them.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { FIXTURES, runCli } from '../helpers/cli.js';

const FAST = ['--quality', 'fast', '--size', 'preview', '--no-progress'];

function workdir(t: Tap.Test): { dir: string; env: Record<string, string> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-first-hour-batch-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, env: { CUTOUT_HOME: path.join(dir, 'home') } };
}

/** Small copies of the fixtures, named as given, in `dir`. */
async function photos(dir: string, names: string[]): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  const sources = ['astronaut', 'chelsea', 'coffee'];
  for (const [i, name] of names.entries()) {
    await sharp(path.join(FIXTURES, `${sources[i % 3]}.jpg`)).resize({ width: 200 }).jpeg().toFile(path.join(dir, name));
  }
}

const jsonLines = (out: Buffer) => out.toString().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
const manifestLines = (file: string) => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));

/** Every file under `dir`, relative, sorted. */
function tree(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile()).sort();
}

t.test('the output folder inside the input folder is never an input, plain and --recursive, first run and rerun', async (t) => {
  const { dir, env } = workdir(t);
  await photos(path.join(dir, 'in'), ['a.jpg']);
  await photos(path.join(dir, 'in', 'sub'), ['b.jpg']);
  await photos(path.join(dir, 'in', 'out'), ['stale.jpg']); // a picture already in the output folder
  const first = await runCli(['in', '-o', 'in/out', '--recursive', '--json', ...FAST], { cwd: dir, env });
  t.equal(first.code, 0, first.stderr);
  t.same(jsonLines(first.stdout).filter((l) => !l.summary).map((l) => l.input).sort(), ['in/a.jpg', 'in/sub/b.jpg'], 'the stale picture in in/out is not an input');
  const glob = await runCli(['in/**/*.jpg', '-o', 'in/out', '--skip-existing', '--json', ...FAST], { cwd: dir, env });
  t.equal(glob.code, 0, glob.stderr);
  t.same(jsonLines(glob.stdout).filter((l) => !l.summary).map((l) => [l.input, Boolean(l.skipped)]).sort(), [['in/a.jpg', true], ['in/sub/b.jpg', true]], 'a glob over the input folder leaves the output folder out too');
  t.same(tree(path.join(dir, 'in', 'out')), ['a.cutout.png', 'stale.jpg', 'sub/b.cutout.png'], 'no out/out, no cutout of the stale picture');
  const same = await runCli(['in', '-o', 'in', '--json', ...FAST], { cwd: dir, env });
  t.equal(same.code, 0, `the input folder as the output folder still works: ${same.stderr}`);
  t.same(jsonLines(same.stdout).filter((l) => !l.summary).map((l) => l.output), ['in/a.cutout.png']);
});

t.test('a shell glob that names yesterday\'s cutouts: they are left out with one line, --include-outputs takes them', async (t) => {
  const { dir, env } = workdir(t);
  await photos(dir, ['x.jpg', 'y.jpg']);
  const first = await runCli(['x.jpg', 'y.jpg', '--format', 'jpg', ...FAST], { cwd: dir, env });
  t.equal(first.code, 0, first.stderr);
  // What `cutout *.jpg --format jpg --skip-existing` is given the second time.
  const names = fs.readdirSync(dir).filter((f) => f.endsWith('.jpg')).sort();
  t.same(names, ['x.cutout.jpg', 'x.jpg', 'y.cutout.jpg', 'y.jpg']);
  const again = await runCli([...names, '--format', 'jpg', '--skip-existing', '--json', ...FAST], { cwd: dir, env });
  t.equal(again.code, 0, again.stderr);
  t.match(again.stderr, /cutout: 2 files \(x\.cutout\.jpg, y\.cutout\.jpg\) are named like cutout's own outputs .*--include-outputs takes them/);
  t.match(jsonLines(again.stdout).at(-1), { summary: { done: 0, skipped: 4, failed: 0 } });
  t.notOk(fs.readdirSync(dir).some((f) => f.includes('.cutout.cutout.')), 'no cutout of a cutout');
  const alone = await runCli(['x.cutout.jpg', ...FAST], { cwd: dir, env });
  t.equal(alone.code, 2, 'a cutout named alone: nothing to do, a usage error');
  t.match(alone.stderr, /nothing to do: x\.cutout\.jpg is named like cutout's own outputs/);
  const asked = await runCli(['x.cutout.jpg', '--include-outputs', '--json', ...FAST], { cwd: dir, env });
  t.equal(asked.code, 0, asked.stderr);
  t.equal(jsonLines(asked.stdout)[0].output, 'x.cutout.cutout.png', '--include-outputs takes it as a photo');
});

t.test('a plain rerun of a finished folder says which flags to use; --manifest then takes the run over, --force redoes it', async (t) => {
  const { dir, env } = workdir(t);
  await photos(path.join(dir, 'in'), ['a.jpg', 'b.jpg']);
  // A plain folder run that did two photos, then a third photo: as a Ctrl-C'd run leaves it.
  const plain = await runCli(['in', '-o', 'out', ...FAST], { cwd: dir, env });
  t.equal(plain.code, 0, plain.stderr);
  const rerun = await runCli(['in', '-o', 'out', ...FAST], { cwd: dir, env });
  t.equal(rerun.code, 1, 'the outputs in the way fail');
  t.match(rerun.stderr, /cutout: 2 outputs already there; run it again with --skip-existing to leave them, --overwrite to replace them, or --manifest FILE to take them as done/);
  await photos(path.join(dir, 'in'), ['a.jpg', 'b.jpg', 'c.jpg']); // a third photo; a and b rewritten as they were
  fs.utimesSync(path.join(dir, 'in', 'a.jpg'), new Date(2020, 0, 1), new Date(2020, 0, 1));
  fs.utimesSync(path.join(dir, 'in', 'b.jpg'), new Date(2020, 0, 1), new Date(2020, 0, 1));

  const adopt = await runCli(['in', '-o', 'out', '--manifest', 'run.jsonl', '--json', ...FAST], { cwd: dir, env });
  t.equal(adopt.code, 0, adopt.stderr);
  t.match(adopt.stderr, /cutout: 2 outputs made before run\.jsonl .* taken as done; --force redoes them/);
  t.match(jsonLines(adopt.stdout).at(-1), { summary: { done: 1, skipped: 2, failed: 0 } });
  const lines = manifestLines(path.join(dir, 'run.jsonl'));
  t.same(lines.map((l) => [l.input, l.output, l.error, Boolean(l.adopted)]).sort(), [
    ['in/a.jpg', 'out/a.cutout.png', null, true], ['in/b.jpg', 'out/b.cutout.png', null, true], ['in/c.jpg', 'out/c.cutout.png', null, false],
  ]);
  t.ok(lines.every((l) => /^[0-9a-f]{64}$/.test(l.sha256)), 'adopted lines carry the photo\'s hash, so a changed photo is redone');

  const resume = await runCli(['in', '-o', 'out', '--manifest', 'run.jsonl', ...FAST], { cwd: dir, env });
  t.equal(resume.code, 0, resume.stderr);
  t.match(resume.stderr, /3 unchanged since run\.jsonl, skipped/);
  t.match(resume.stderr, /the model was not loaded/);

  const force = await runCli(['in', '-o', 'out', '--manifest', 'run.jsonl', '--force', '--json', ...FAST], { cwd: dir, env });
  t.equal(force.code, 0, `--force redoes every photo, replacing its output: ${force.stderr}`);
  t.match(jsonLines(force.stdout).at(-1), { summary: { done: 3, skipped: 0, failed: 0 } });
});

t.test('a photo changed after its output was made is not adopted', async (t) => {
  const { dir, env } = workdir(t);
  await photos(path.join(dir, 'in'), ['a.jpg']);
  t.equal((await runCli(['in', '-o', 'out', ...FAST], { cwd: dir, env })).code, 0);
  const later = new Date(Date.now() + 60_000);
  fs.utimesSync(path.join(dir, 'in', 'a.jpg'), later, later);
  const r = await runCli(['in', '-o', 'out', '--manifest', 'run.jsonl', '--dry-run', '--json'], { cwd: dir, env });
  t.equal(r.code, 0, r.stderr);
  t.match(jsonLines(r.stdout)[0], { input: 'in/a.jpg', action: 'fail', reason: /output exists/ });
});
