/**
 * Product photos (docs/product-photos.md) through `cutout` as users type it, on the real model:
 * an exact canvas with padding and a shadow; a portrait cut by the photo's bottom snapping to
 * the canvas's bottom; a bare `--shadow` drawing the float shadow; bad values as usage errors
 * (exit 2) naming the flag; and a manifest rerun that redoes a photo whose shadow changed.
 * Quality fast.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { tempDataDir } from '../helpers/api-server.js';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { boundingBox } from '../../src/pipeline/matte.js';

const FAST = ['--quality', 'fast', '-q'];

async function alphaBox(file: string) {
  const { data, info } = await sharp(file).extractChannel(3).raw().toBuffer({ resolveWithObject: true });
  return { box: boundingBox(data, info.width, info.height, 128)!, width: info.width, height: info.height };
}

t.test('--canvas with --padding: the exact size, the padding within 2 px; the cropped portrait snaps', async (t) => {
  const dir = await tempDataDir(t);
  const cup = path.join(dir, 'cup.png');
  const r = await runCli([path.join(FIXTURES, 'coffee.jpg'), '--canvas', '400x300', '--padding', '10%', '-o', cup, '--data', dir, ...FAST]);
  t.equal(r.code, 0, r.stderr);
  const { box, width, height } = await alphaBox(cup);
  t.same([width, height], [400, 300], 'exactly the canvas');
  // The cup is not cut by the photo's edges: it fits inside 320 x 240, touching one pair of sides.
  const pads = [box.left, box.top, width - box.left - box.width, height - box.top - box.height];
  t.ok(pads.every((p) => p >= 40 * 0.75 - 2), `no side closer than its padding (${pads})`);
  t.ok(Math.abs(pads[0] - 40) <= 2 && Math.abs(pads[2] - 40) <= 2 || Math.abs(pads[1] - 30) <= 2 && Math.abs(pads[3] - 30) <= 2, `one pair of sides at its padding within 2 px (${pads})`);

  // The astronaut is cut by the photo's bottom: that side snaps to the canvas's edge.
  const portrait = path.join(dir, 'portrait.png');
  const p = await runCli([path.join(FIXTURES, 'astronaut.jpg'), '--canvas', '400x400', '--padding', '10%', '-o', portrait, '--data', dir, ...FAST]);
  t.equal(p.code, 0, p.stderr);
  const a = await alphaBox(portrait);
  t.equal(a.box.top + a.box.height, 400, 'the cropped bottom touches the canvas\'s bottom');
  t.ok(a.box.top >= 38, `the top keeps its padding (${a.box.top})`);
  const kept = path.join(dir, 'kept.png');
  const k = await runCli([path.join(FIXTURES, 'astronaut.jpg'), '--canvas', '400x400', '--padding', '10%', '--snap-cropped', 'false', '-o', kept, '--data', dir, ...FAST]);
  t.equal(k.code, 0, k.stderr);
  const kb = await alphaBox(kept);
  t.ok(Math.abs(400 - kb.box.top - kb.box.height - 40) <= 2, `--snap-cropped false: the bottom keeps its padding (${400 - kb.box.top - kb.box.height})`);
});

t.test('a bare --shadow draws the float shadow', async (t) => {
  const dir = await tempDataDir(t);
  const input = path.join(FIXTURES, 'coffee.jpg');
  const out = (name: string) => path.join(dir, name);
  for (const [name, flags] of [['bare.png', ['--shadow']], ['float.png', ['--shadow', 'float']], ['none.png', []]] as const) {
    const r = await runCli([input, '--canvas', '300x300', '--padding', '15%', '--bg-color', 'white', ...flags, '-o', out(name), '--data', dir, ...FAST]);
    t.equal(r.code, 0, `${name}: ${r.stderr}`);
  }
  const pixels = async (name: string) => sharp(out(name)).raw().toBuffer();
  t.ok((await pixels('bare.png')).equals(await pixels('float.png')), 'the bare flag is float');
  t.notOk((await pixels('none.png')).equals(await pixels('float.png')), 'and it draws a shadow');
});

t.test('bad values are usage errors naming the flag', async (t) => {
  const dir = await tempDataDir(t);
  const input = path.join(FIXTURES, 'coffee.jpg');
  for (const [flag, value] of [['--canvas', '0x100'], ['--padding', '60%'], ['--align', 'up'], ['--shadow', 'soft'], ['--shadow-opacity', '1.5'], ['--outline-width', '0.5'], ['--bg-blur', '1'], ['--dpi', '10'], ['--max-width', 'wide']]) {
    const r = await runCli([input, flag, value, '--data', dir, ...FAST]);
    t.equal(r.code, 2, `${flag} ${value}: exit 2`);
    t.match(r.stderr, flag, `${flag} ${value}: named (${r.stderr.trim()})`);
  }
});

t.test('a manifest rerun redoes a photo whose shadow changed, and skips it otherwise', async (t) => {
  const dir = await tempDataDir(t);
  await fs.mkdir(path.join(dir, 'in'));
  await fs.copyFile(path.join(FIXTURES, 'coffee.jpg'), path.join(dir, 'in', 'cup.jpg'));
  const run = (shadow: string) => runCli(['in', '--out', 'out', '--manifest', 'run.jsonl', '--canvas', '300x300', '--shadow', shadow, '--json', '--data', dir, ...FAST], { cwd: dir });
  const lines = async () => (await fs.readFile(path.join(dir, 'run.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
  t.equal((await run('drop')).code, 0);
  t.equal((await lines()).length, 1);
  t.equal((await lines())[0].options.shadow, 'drop', 'the manifest records the shadow');
  t.equal((await run('drop')).code, 0);
  t.equal((await lines()).length, 1, 'the same shadow: skipped, no line appended');
  const redo = await run('cast');
  t.equal(redo.code, 0, redo.stderr);
  const after = await lines();
  t.equal(after.length, 2, 'another shadow: redone');
  t.match(after[1], { input: 'in/cup.jpg', error: null, options: { shadow: 'cast' } });
});

t.test('cutout --shadow photo.jpg, the switch remove.bg users type, still cuts out photo.jpg (issue 54)', async (t) => {
  const dir = await tempDataDir(t);
  const photo = path.join(dir, 'photo.jpg');
  await fs.copyFile(path.join(FIXTURES, 'coffee.jpg'), photo);
  const r = await runCli(['--shadow', photo, '--data', dir, ...FAST]);
  t.equal(r.code, 0, `exit 0 (${r.stderr.trim()})`);
  t.ok(await fs.stat(path.join(dir, 'photo.cutout.png')).catch(() => null), 'photo.cutout.png written');
});

t.test('a canvas with remove.bg\'s crop is a usage error before any photo is read (exit 2, nothing written)', async (t) => {
  const dir = await tempDataDir(t);
  const photo = path.join(dir, 'photo.jpg');
  await fs.copyFile(path.join(FIXTURES, 'coffee.jpg'), photo);
  const r = await runCli([photo, '--canvas', '300x300', '--crop', '--data', dir, ...FAST]);
  t.equal(r.code, 2, `exit 2 (${r.stderr.trim()})`);
  t.match(r.stderr, /crop|canvas/, 'the flags are named');
  t.notOk(await fs.stat(path.join(dir, 'photo.cutout.png')).catch(() => null), 'nothing written');
});
