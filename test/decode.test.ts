import t from 'tap';
import sharp from 'sharp';
import zlib from 'node:zlib';
import fs from 'node:fs';
import { decodeRgb, missingEndMarker, openImage, outputSize, probeImage, readBmpSize, resolveSize, sniffFormat } from '../src/pipeline/decode.js';
import { CutoutError } from '../src/errors.js';
import { formatMB, LIMITS, shownAbove } from '../src/limits.js';

const bytes = (...b: number[]) => Uint8Array.from(b);

t.test('sniffFormat accepts the six formats and nothing else', async (t) => {
  t.equal(sniffFormat(bytes(0xff, 0xd8, 0xff, 0xe0)), 'jpeg');
  t.equal(sniffFormat(bytes(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)), 'png');
  t.equal(sniffFormat(Buffer.from('GIF89a')), 'gif');
  t.equal(sniffFormat(Buffer.from('RIFF\0\0\0\0WEBPVP8 ')), 'webp');
  t.equal(sniffFormat(Buffer.concat([Buffer.from('BM'), Buffer.alloc(30)])), 'bmp');
  t.equal(sniffFormat(bytes(0x49, 0x49, 0x2a, 0x00)), 'tiff');
  t.equal(sniffFormat(bytes(0x4d, 0x4d, 0x00, 0x2a)), 'tiff');
  t.equal(sniffFormat(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')), null);
  t.equal(sniffFormat(Buffer.from('\0\0\0\x1cftypavif')), null, 'AVIF is refused');
  t.equal(sniffFormat(Buffer.from('hello')), null);
  t.equal(sniffFormat(new Uint8Array(0)), null);
});

t.test('readBmpSize reads info and core headers', async (t) => {
  const info = Buffer.alloc(54);
  info.write('BM');
  info.writeUInt32LE(40, 14);
  info.writeInt32LE(640, 18);
  info.writeInt32LE(-480, 22); // top-down
  t.same(readBmpSize(info), { width: 640, height: 480 });
  const core = Buffer.alloc(26);
  core.write('BM');
  core.writeUInt32LE(12, 14);
  core.writeUInt16LE(33, 18);
  core.writeUInt16LE(7, 20);
  t.same(readBmpSize(core), { width: 33, height: 7 });
});

t.test('size resolution', async (t) => {
  t.equal(resolveSize('auto', 2000, 2000), 'full');
  t.equal(resolveSize('auto', 2001, 2000), 'preview');
  t.equal(resolveSize('preview', 10, 10), 'preview');
  t.same(outputSize('preview', 4000, 3000), { width: 800, height: 600 });
  t.same(outputSize('preview', 300, 200), { width: 300, height: 200 }, 'never enlarged');
  t.same(outputSize('full', 4000, 3000), { width: 4000, height: 3000 });
});

t.test('probeImage checks limits from the header before decoding', async (t) => {
  // A 60 MP PNG header: 10000 x 6000, compressed to almost nothing.
  const big = await sharp({ create: { width: 10000, height: 6000, channels: 3, background: '#fff' } }).png({ compressionLevel: 9 }).toBuffer();
  const err = await probeImage(big).catch((e) => e);
  t.type(err, CutoutError);
  t.equal(err.code, 'image_too_large');
  t.match(err.message, /60 MP/);

  const rotated = await sharp({ create: { width: 40, height: 20, channels: 3, background: '#f00' } }).jpeg().withMetadata({ orientation: 6 }).toBuffer();
  t.same(await probeImage(rotated), { format: 'jpeg', width: 20, height: 40, frames: 1 }, 'EXIF orientation 6 swaps the sides');

  const truncated = (await sharp({ create: { width: 64, height: 64, channels: 3, background: '#0f0' } }).jpeg().toBuffer()).subarray(0, 100);
  const terr = await probeImage(Buffer.from(truncated)).then(() => null, (e) => e);
  // The header may still parse: a truncated file is refused at the latest when decoded (see the CLI test).
  if (terr) t.equal(terr.code, 'unsupported_format');

  const empty = await probeImage(Buffer.alloc(0)).catch((e) => e);
  t.equal(empty.code, 'unsupported_format');
  const text = await probeImage(Buffer.from('just some text')).catch((e) => e);
  t.equal(text.code, 'unsupported_format');
});

t.test('missingEndMarker tells a cut-off file from a whole one', async (t) => {
  const jpg = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#123' } }).jpeg().toBuffer();
  const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#123' } }).png().toBuffer();
  const gif = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#123' } }).gif().toBuffer();
  t.equal(missingEndMarker(jpg, 'jpeg'), false);
  t.equal(missingEndMarker(jpg.subarray(0, jpg.length - 10), 'jpeg'), true);
  t.equal(missingEndMarker(png, 'png'), false);
  t.equal(missingEndMarker(png.subarray(0, png.length - 3), 'png'), true);
  t.equal(missingEndMarker(gif, 'gif'), false);
  t.equal(missingEndMarker(gif.subarray(0, gif.length - 1), 'gif'), true);
  t.equal(missingEndMarker(Buffer.from('II*\0'), 'tiff'), false, 'no marker to check');
});

t.test('25 MB is 25,000,000 bytes, as 50 MP is 50,000,000 pixels', async (t) => {
  t.equal(LIMITS.maxInputBytes, 25_000_000);
  t.equal(formatMB(LIMITS.maxInputBytes), '25 MB');
  t.equal(formatMB(25_500_000), '25.5 MB');
  // Over 25 MB but under 25 MiB: refused before the bytes are looked at.
  const err = await probeImage(Buffer.alloc(25_500_000)).catch((e) => e);
  t.match(err, { code: 'image_too_large', message: /25\.5 MB; the limit is 25 MB/ });
});

t.test('a size just over a limit is never shown as the limit itself', async (t) => {
  t.equal(shownAbove(25_000_001, LIMITS.maxInputBytes, 1e6), '25.000001');
  t.equal(shownAbove(25_040_000, LIMITS.maxInputBytes, 1e6), '25.04');
  t.equal(shownAbove(26_300_000, LIMITS.maxInputBytes, 1e6), '26.3');
  t.equal(shownAbove(10_001 * 5_000, LIMITS.maxInputPixels, 1e6), '50.005');
  t.equal(shownAbove(50_009_999, LIMITS.maxInputPixels, 1e6), '50.009', 'truncated: never more than the real size');
  const err = await probeImage(Buffer.alloc(25_000_001)).catch((e) => e);
  t.match(err, { code: 'image_too_large', message: 'Input is 25.000001 MB; the limit is 25 MB' });
  // A 1x1 PNG whose header is made to say 10001x5000 (50,005,000 pixels): refused from the header.
  const header = await sharp({ create: { width: 1, height: 1, channels: 3, background: '#fff' } }).png().toBuffer();
  header.writeUInt32BE(10_001, 16);
  header.writeUInt32BE(5_000, 20);
  header.writeUInt32BE(zlib.crc32(header.subarray(12, 29)), 29);
  const tooBig = await probeImage(header).catch((e) => e);
  t.match(tooBig, { code: 'image_too_large', message: /10001x5000 \(50\.005 MP\); the limit is 50 megapixels/ });
});


t.test('a JPEG missing only its 2-byte end marker is decoded whole; one cut short is refused as truncated (issue 51)', async (t) => {
  for (const name of ['astronaut', 'chelsea', 'coffee']) {
    const whole = fs.readFileSync(new URL(`fixtures/${name}.jpg`, import.meta.url));
    t.equal(whole.subarray(-2).toString('hex'), 'ffd9', `${name}.jpg ends in its end marker`);
    const decode = async (b: Buffer) => {
      const src = await openImage(b);
      return decodeRgb(src, src.probe.width, src.probe.height);
    };
    const pixels = await decode(whole);
    // FF D9 cut (and FF D9's second byte only): every scan is there, the same pixels as the whole file.
    for (const cut of [2, 1]) {
      const got = await decode(whole.subarray(0, whole.length - cut)).catch((e: Error) => e);
      t.ok(Buffer.isBuffer(got), `${name}.jpg without its last ${cut} byte(s) decodes: ${(got as Error).message ?? 'ok'}`);
      if (Buffer.isBuffer(got)) t.ok(got.equals(pixels), `${name}.jpg without its last ${cut} byte(s): the whole file's pixels`);
    }
    // Cut in its scan data (half, or 3 bytes short of the end): refused, with a clear message.
    for (const length of [Math.floor(whole.length / 2), whole.length - 3]) {
      const err = await decode(whole.subarray(0, length)).catch((e: Error) => e);
      t.type(err, CutoutError, `${name}.jpg cut to ${length} of ${whole.length} bytes is refused`);
      t.match(err, { code: 'unsupported_format', message: 'Truncated JPEG file' });
    }
  }
});
