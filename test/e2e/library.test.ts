/**
 * The library (issue 25) in process, on the real model: every input kind, every option, the
 * errors and their codes, abort and close, two removers at other precisions beside the CLI, and a
 * remover on an upstream (the minimal protocol server of the tests). The packed package from a
 * fresh folder (ESM, CommonJS, strict TypeScript) is test/package.test.ts.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { createRemover, CutoutError, removeBackground, type Remover } from '../../src/index.js';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { startMinimalOip } from '../helpers/minimal-oip.js';

const COFFEE = path.join(FIXTURES, 'coffee.jpg'); // 600x400
const coffee = fs.readFileSync(COFFEE);

async function remover(t: Tap.Test, options: Parameters<typeof createRemover>[0] = {}): Promise<Remover> {
  const r = await createRemover(options);
  t.teardown(() => r.close());
  return r;
}

async function rejection(p: Promise<unknown>): Promise<{ name: string; code?: string; message: string; isCutout: boolean }> {
  const err = (await p.then(() => null, (e: unknown) => e)) as (Error & { code?: string }) | null;
  if (!err) throw new Error('expected a rejection');
  return { name: err.name, code: err.code, message: err.message, isCutout: err instanceof CutoutError };
}

t.test('every input kind gives the same cutout; the format comes from the bytes', async (t) => {
  const r = await remover(t);
  const reference = await r.remove(coffee);
  t.same([reference.width, reference.height, reference.format, reference.channels, reference.contentType], [600, 400, 'png', 4, 'image/png']);
  t.same(reference.input, { format: 'jpeg', width: 600, height: 400, frames: 1 }, 'the input as read from its bytes');
  const u8 = new Uint8Array(coffee.byteLength);
  u8.set(coffee);
  const inputs: [string, unknown][] = [
    ['a path', COFFEE],
    ['a file: URL string', pathToFileURL(COFFEE).href],
    ['a file: URL', pathToFileURL(COFFEE)],
    ['a Uint8Array', u8],
    ['an ArrayBuffer', u8.buffer],
    ['a Blob without a type', new Blob([coffee])],
    ['a Blob with a wrong type', new Blob([coffee], { type: 'text/plain' })],
    ['a Node Readable', fs.createReadStream(COFFEE, { highWaterMark: 1024 })],
    ['a web ReadableStream', Readable.toWeb(fs.createReadStream(COFFEE))],
  ];
  for (const [what, input] of inputs) {
    const out = await r.remove(input as Parameters<Remover['remove']>[0]);
    t.ok(out.data.equals(reference.data), `${what}: the same bytes as from a Buffer`);
  }
  // Raw pixels: decoded by the caller, so the pipeline sees the same RGB as from the JPEG.
  const { data, info } = await sharp(coffee).raw().toBuffer({ resolveWithObject: true });
  const fromRaw = await r.remove({ data, width: info.width, height: info.height, channels: info.channels as 3 });
  t.same([fromRaw.width, fromRaw.height, fromRaw.input.format], [600, 400, 'raw']);
  t.ok(fromRaw.data.equals(reference.data), 'raw RGB pixels: the same cutout');
  const rgba = await sharp(coffee).ensureAlpha().raw().toBuffer();
  const fromRgba = await r.remove({ data: new Uint8ClampedArray(rgba), width: 600, height: 400, channels: 4 });
  t.ok(fromRgba.data.equals(reference.data), 'raw RGBA pixels (opaque): the same cutout');
});

t.test('options: the CLI names and defaults; raw pixels for a sharp chain', async (t) => {
  const r = await remover(t);
  const raw = await r.remove(coffee, { format: 'raw' });
  t.same([raw.format, raw.channels, raw.contentType, raw.data.length], ['raw', 4, 'application/octet-stream', 600 * 400 * 4], 'raw: 8-bit RGBA');
  const png = await sharp((await r.remove(coffee)).data).raw().toBuffer();
  t.ok(raw.data.equals(png), 'raw pixels equal the decoded PNG');
  // Straight into sharp, no encode and decode between.
  const chained = await sharp(raw.data, { raw: { width: raw.width, height: raw.height, channels: raw.channels } }).resize(300).png().toBuffer();
  t.same((await sharp(chained).metadata()).width, 300);

  const mask = await r.remove(coffee, { format: 'raw', mask: true });
  t.same([mask.channels, mask.data.length], [1, 600 * 400], 'raw mask: one channel');
  t.ok(mask.data.some((v) => v === 0) && mask.data.some((v) => v === 255), 'background and subject in the matte');
  const hard = await r.remove(coffee, { format: 'raw', mask: true, alpha: 'hard' });
  t.ok(hard.data.every((v) => v === 0 || v === 255), 'alpha hard: only 0 and 255');
  const soft = mask.data.filter((v) => v > 0 && v < 255).length;
  t.ok(soft > 0, `alpha soft has edge values (${soft})`);

  const onWhite = await r.remove(coffee, { format: 'raw', bgColor: '#ffffff' });
  t.same(onWhite.channels, 4, 'raw stays RGBA on a colour');
  let opaque = true;
  for (let i = 3; i < onWhite.data.length; i += 4) if (onWhite.data[i] !== 255) opaque = false;
  t.ok(opaque, 'a flat colour: every alpha 255');
  t.same([...onWhite.data.subarray(0, 4)], [255, 255, 255, 255], 'the corner is the colour');

  t.same((await r.remove(coffee, { size: 'preview' })).width, 600, 'a 600 px photo is its own preview (never enlarged)');
  const big = await sharp(coffee).resize(1600).jpeg().toBuffer();
  const preview = await r.remove(big, { size: 'preview' });
  t.same([preview.width, Math.abs(preview.height - 533) <= 1], [800, true], `preview: longest side 800 (${preview.width}x${preview.height})`);
  t.same((await r.remove(big)).width, 1600, 'default size: full');
  const cropped = await r.remove(coffee, { crop: true });
  t.ok(cropped.width < 600 || cropped.height < 400, `crop: the subject's box (${cropped.width}x${cropped.height})`);
  const webp = await r.remove(coffee, { format: 'webp' });
  t.same([webp.contentType, webp.data.subarray(8, 12).toString()], ['image/webp', 'WEBP']);
  const jpg = await r.remove(coffee, { format: 'jpg' });
  t.same([jpg.contentType, jpg.channels, jpg.data[0], jpg.data[1]], ['image/jpeg', 3, 0xff, 0xd8]);
  const fast = await r.remove(coffee, { quality: 'fast', refine: false, decontaminate: false });
  t.same([fast.width, fast.height], [600, 400], 'quality fast, refine and decontaminate off');
});

t.test('bad input and bad options reject with the API codes', async (t) => {
  const r = await remover(t);
  const cases: [string, () => Promise<unknown>, string, RegExp][] = [
    ['text', () => r.remove(Buffer.from('just some text')), 'unsupported_format', /Not a JPEG/],
    ['an empty Buffer', () => r.remove(Buffer.alloc(0)), 'unsupported_format', /Empty/],
    ['over 25 MB', () => r.remove(Buffer.alloc(25_000_001)), 'image_too_large', /limit is 25 MB/],
    ['a missing file', () => r.remove('/nonexistent/photo.jpg'), 'invalid_request', /Cannot read/],
    ['an http URL', () => r.remove(new URL('http://example.com/a.jpg')), 'invalid_request', /not fetched/],
    ['an https string', () => r.remove('https://example.com/a.jpg'), 'invalid_request', /not fetched/],
    ['a number', () => r.remove(42 as never), 'invalid_request', /Expected a file path/],
    ['raw of the wrong length', () => r.remove({ data: new Uint8Array(10), width: 4, height: 4, channels: 3 }), 'invalid_request', /needs 48 bytes/],
    ['raw over 50 MP', () => r.remove({ data: new Uint8Array(3), width: 10_000, height: 5_001, channels: 3 }), 'image_too_large', /megapixels/],
    ['format tiff', () => r.remove(coffee, { format: 'tiff' as never }), 'invalid_request', /png, webp, jpg, gif, auto, zip, raw for format/],
    ['an unknown option', () => r.remove(coffee, { colour: 'red' } as never), 'invalid_request', /Unknown remove option colour/],
    ['a bad colour', () => r.remove(coffee, { bgColor: 'reddish' }), 'invalid_request', /bgColor/],
  ];
  for (const [what, p, code, message] of cases) {
    const e = await rejection(p());
    t.ok(e.isCutout, `${what}: a CutoutError`);
    t.equal(e.code, code, `${what}: ${code}`);
    t.match(e.message, message, `${what}: ${e.message}`);
  }
  // An endless stream is cut off at the limit, and destroyed.
  let produced = 0;
  const endless = new Readable({
    read() {
      produced += 1 << 20;
      this.push(Buffer.alloc(1 << 20));
    },
  });
  const e = await rejection(r.remove(endless));
  t.equal(e.code, 'image_too_large', 'an endless stream: image_too_large');
  t.ok(endless.destroyed, 'the stream was destroyed');
  t.ok(produced < 40 << 20, `read about the limit, not more (${produced >> 20} MB)`);
  const noSubject = await rejection(r.remove(await sharp({ create: { width: 300, height: 200, channels: 3, background: '#808080' } }).png().toBuffer()));
  t.equal(noSubject.code, 'no_subject_detected', 'a flat grey picture: no_subject_detected');
  for (const bad of [{ precision: 'fp16' }, { concurrency: 0 }, { model: 'no-such-model' }, { modle: 'x' }]) {
    const err = await rejection(createRemover(bad as never));
    t.same([err.isCutout, err.code], [true, 'invalid_request'], `createRemover(${JSON.stringify(bad)}): ${err.message}`);
  }
});

t.test('abort before and during a call; close waits, then refuses', async (t) => {
  const r = await remover(t);
  const before = await rejection(r.remove(coffee, { signal: AbortSignal.abort() }));
  t.equal(before.name, 'AbortError', 'aborted before the call');
  const controller = new AbortController();
  const started = performance.now();
  const call = r.remove(await sharp(coffee).resize(2400).jpeg().toBuffer(), { signal: controller.signal });
  setTimeout(() => controller.abort(), 300);
  const during = await rejection(call);
  t.equal(during.name, 'AbortError', `aborted during the call (after ${Math.round(performance.now() - started)} ms)`);
  const reason = new Error('stop now');
  const custom = await rejection(r.remove(coffee, { signal: AbortSignal.abort(reason) }));
  t.same([custom.name], ['AbortError'], 'a reason of its own: still an AbortError');
  // Nothing leaked: the same remover goes on.
  t.same((await r.remove(coffee)).width, 600, 'the remover works after an abort');

  // Close waits for calls in flight, then refuses.
  const inFlight = r.remove(coffee);
  const closing = r.close();
  t.same((await inFlight).width, 600, 'the call in flight finished');
  await closing;
  const after = await rejection(r.remove(coffee));
  t.same([after.code, after.message], ['invalid_request', 'This remover is closed']);
  t.equal(typeof r[Symbol.asyncDispose], 'function', 'await using works');
  await r[Symbol.asyncDispose]();
});

t.test('two removers (fp32 and int8) side by side equal the CLI at those precisions', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-library-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fp32 = await remover(t, { precision: 'fp32' });
  const int8 = await remover(t, { precision: 'int8' });
  const [a, b] = await Promise.all([fp32.remove(coffee), int8.remove(coffee)]);
  t.notOk(a.data.equals(b.data), 'the two precisions give different bytes (both ran, each its own)');
  for (const [precision, result] of [['fp32', a], ['int8', b]] as const) {
    const out = path.join(dir, `${precision}.png`);
    const cli = await runCli([COFFEE, '--precision', precision, '-o', out, '--data', dir]);
    t.equal(cli.code, 0, cli.stderr);
    t.ok(fs.readFileSync(out).equals(result.data), `${precision}: byte for byte the CLI's cutout`);
  }
  await fp32.close();
  t.same((await int8.remove(coffee)).data.equals(b.data), true, 'closing one leaves the other working');
});

t.test('the shared remover of removeBackground', async (t) => {
  const r = await removeBackground(coffee, { format: 'raw', mask: true });
  t.same([r.width, r.height, r.channels], [600, 400, 1]);
  const e = await rejection(removeBackground(coffee, { size: 'huge' as never }));
  t.equal(e.code, 'invalid_request');
});

t.test('a remover on an upstream: the model runs there', async (t) => {
  const minimal = await startMinimalOip(t);
  const r = await remover(t, { upstream: minimal.url });
  const seen = minimal.seen.length;
  const out = await r.remove(coffee, { format: 'raw', mask: true });
  t.equal(minimal.seen.length, seen + 1, 'one inference reached the upstream');
  // The upstream runs the fp32 weights (minimal-oip.ts), as the fp32 remover here does.
  const local = await remover(t, { precision: 'fp32' });
  const here = await local.remove(coffee, { format: 'raw', mask: true });
  let far = 0;
  for (let i = 0; i < out.data.length; i++) if (Math.abs(out.data[i] - here.data[i]) > 16) far++;
  t.ok(far < out.data.length * 0.02, `the upstream's matte is close to the local one (${far} of ${out.data.length} pixels beyond 16)`);
  const bad = await rejection(createRemover({ upstream: 'http://127.0.0.1:9' }));
  t.ok(bad.isCutout, `an unreachable upstream: a CutoutError (${bad.code}: ${bad.message})`);
});

t.test('product photos in the library (issue 54): the same options as the CLI and v1, camelCase', async (t) => {
  const r = await remover(t);
  const listing = await r.remove(coffee, { canvas: '400x300', padding: '10%', shadow: 'float', outlineWidth: '6px', bgColor: 'white', format: 'jpg', dpi: 300 });
  t.same([listing.width, listing.height, listing.format], [400, 300, 'jpg'], 'exactly the canvas');
  t.equal((await sharp(listing.data).metadata()).density, 300, 'its dpi in the file');
  const cli = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-lib-product-')), 'listing.jpg');
  const run = await runCli([COFFEE, '--canvas', '400x300', '--padding', '10%', '--shadow', 'float', '--outline-width', '6px', '--bg-color', 'white', '--dpi', '300', '-o', cli]);
  t.equal(run.code, 0, run.stderr);
  const [a, b] = await Promise.all([sharp(listing.data).raw().toBuffer(), sharp(cli).raw().toBuffer()]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff += Math.abs(a[i] - b[i]);
  t.ok(a.length === b.length && diff / a.length < 2, `the library's listing is the CLI's (mean difference ${(diff / a.length).toFixed(2)} of 255)`);
  const bad = await rejection(r.remove(coffee, { canvas: '400x300', crop: true }));
  t.match(bad, { code: 'invalid_request', isCutout: true }, 'a canvas with crop is refused as at the other doors');
});
