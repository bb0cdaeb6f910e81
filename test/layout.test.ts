/**
 * remove.bg's image options as pure functions: colours with alpha and CSS names, the parsers of
 * crop_margin / roi / scale / position, the layout arithmetic, compositing over a background,
 * output areas, and the stored zip.
 */
import t from 'tap';
import { colorFromText, colorToText } from '../src/colors.js';
import { parseCropMargin, parsePosition, parseRoi, parseScale } from '../src/layout-options.js';
import { OptionError } from '../src/options.js';
import { overBackground } from '../src/pipeline/background.js';
import { fitArea } from '../src/pipeline/decode.js';
import { blit, keepInside, marginBox, placeSubject, resolveRoi } from '../src/pipeline/layout.js';
import { storedZip } from '../src/pipeline/zip.js';
import { readZip } from './helpers/zip-read.js';

t.test('colours: hex with alpha, CSS names, transparent', async (t) => {
  t.same(colorFromText('rebeccapurple'), { r: 0x66, g: 0x33, b: 0x99 });
  t.same(colorFromText(' GREEN '), { r: 0, g: 128, b: 0 });
  t.same(colorFromText('#81d4fa77'), { r: 0x81, g: 0xd4, b: 0xfa, a: 0x77 });
  t.same(colorFromText('0f08'), { r: 0, g: 255, b: 0, a: 0x88 });
  t.equal(colorFromText('00000000'), null);
  t.equal(colorFromText('transparent'), null);
  t.equal(colorFromText('#12345'), undefined);
  t.equal(colorFromText('blurple'), undefined);
  t.equal(colorToText({ r: 255, g: 0, b: 16, a: 0x80 }), '#ff001080');
  t.equal(colorToText({ r: 255, g: 0, b: 16 }), '#ff0010');
});

t.test('crop_margin: 1, 2 or 4 lengths, bounded', async (t) => {
  const px = (value: number) => ({ value, unit: 'px' });
  const pc = (value: number) => ({ value, unit: '%' });
  t.same(parseCropMargin('20px', 'api'), { top: px(20), right: px(20), bottom: px(20), left: px(20) });
  t.same(parseCropMargin('10px 5%', 'api'), { top: px(10), right: pc(5), bottom: px(10), left: pc(5) });
  t.same(parseCropMargin('1 2px 3% 4', 'api'), { top: px(1), right: px(2), bottom: pc(3), left: px(4) });
  t.same(parseCropMargin(30, 'api').left, px(30), 'a JSON number is pixels');
  for (const bad of ['501px', '51%', '1 2 3', 'ten', '', '-5px']) {
    const err = t.throws(() => parseCropMargin(bad, 'cli')) as unknown as OptionError;
    t.equal(err.param, 'crop_margin', bad);
    t.match(err.message, /--crop-margin/);
  }
});

t.test('roi, scale, position parse', async (t) => {
  t.same(parseRoi('0% 0% 100% 100%', 'api'), { x1: { value: 0, unit: '%' }, y1: { value: 0, unit: '%' }, x2: { value: 100, unit: '%' }, y2: { value: 100, unit: '%' } });
  t.same(parseRoi('10px 20px 30 40', 'api').x2, { value: 30, unit: 'px' });
  t.throws(() => parseRoi('1 2 3', 'api'), /x1 y1 x2 y2/);
  t.equal(parseScale('original', 'api'), undefined);
  t.equal(parseScale('80%', 'api'), 0.8);
  t.equal(parseScale('10%', 'api'), 0.1);
  for (const bad of ['9%', '101%', '50', 'big']) t.throws(() => parseScale(bad, 'api'), /10% to 100%/, bad);
  t.equal(parsePosition('original', 'api'), 'original');
  t.equal(parsePosition('center', 'api'), 'center');
  t.same(parsePosition('25%', 'api'), { x: 0.25, y: 0.25 });
  t.same(parsePosition('0% 100%', 'api'), { x: 0, y: 1 });
  for (const bad of ['left', '101%', '1% 2% 3%', '50px']) t.throws(() => parsePosition(bad, 'api'), /original, center/, bad);
});

t.test('roi resolves to output pixels; bounds and emptiness have their own reasons', async (t) => {
  const roi = parseRoi('50px 0% 150px 50%', 'api');
  t.same(resolveRoi(roi, 200, 100, 100, 50), { left: 25, top: 0, width: 50, height: 25 });
  const beyond = t.throws(() => resolveRoi(parseRoi('0 0 201px 100px', 'api'), 200, 100, 200, 100)) as unknown as OptionError;
  t.equal(beyond.reason, 'roi_exceeds_bounds');
  const over = t.throws(() => resolveRoi(parseRoi('0 0 101% 100%', 'api'), 200, 100, 200, 100)) as unknown as OptionError;
  t.equal(over.reason, 'roi_exceeds_bounds');
  const empty = t.throws(() => resolveRoi(parseRoi('100px 0 50px 100px', 'api'), 200, 100, 200, 100)) as unknown as OptionError;
  t.equal(empty.reason, 'roi_region_empty');
  t.equal(empty.code, 'invalid_request');
});

t.test('keepInside clears the matte outside the box', async (t) => {
  const alpha = new Uint8Array(4 * 3).fill(200);
  t.equal(keepInside(alpha, 4, 3, { left: 1, top: 1, width: 2, height: 1 }), true);
  t.same([...alpha], [0, 0, 0, 0, 0, 200, 200, 0, 0, 0, 0, 0]);
  const empty = new Uint8Array(9);
  empty[0] = 255;
  t.equal(keepInside(empty, 3, 3, { left: 1, top: 1, width: 2, height: 2 }), false, 'foreground only outside');
});

t.test('margins grow the box, past the image too; the subject is placed by scale and position', async (t) => {
  const subject = { left: 10, top: 20, width: 100, height: 50 };
  t.same(marginBox(subject, parseCropMargin('10%', 'api')), { left: 0, top: 15, width: 120, height: 60 });
  t.same(marginBox(subject, parseCropMargin('30px 0', 'api')), { left: 10, top: -10, width: 100, height: 110 });
  // Scale 50 % of a 400x400 canvas: the box's longer side becomes 200, centred.
  t.same(placeSubject(subject, 400, 400, 0.5, 'center'), { left: 100, top: 150, width: 200, height: 100 });
  t.same(placeSubject(subject, 400, 400, undefined, { x: 1, y: 0 }), { left: 300, top: 0, width: 100, height: 50 });
  t.same(placeSubject(subject, 400, 400, 0.5, 'original'), { left: -40, top: -5, width: 200, height: 100 }, 'scaled about its centre');
});

t.test('blit copies a clipped rectangle; outside the source reads as zero', async (t) => {
  const src = Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9]); // 3x3, one channel
  const dst = new Uint8Array(16); // 4x4
  blit(src, 3, 3, 1, { left: -1, top: -1, width: 4, height: 4 }, dst, 4, 4, 0, 0);
  t.same([...dst], [0, 0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9]);
  const dst2 = new Uint8Array(4); // 2x2, the source's centre at (-1,-1): only 5,6,8,9 land... clipped to 2x2
  blit(src, 3, 3, 1, { left: 0, top: 0, width: 3, height: 3 }, dst2, 2, 2, -1, -1);
  t.same([...dst2], [5, 6, 8, 9]);
  const rgb = Uint8Array.from([1, 1, 1, 2, 2, 2]); // 2x1 RGB
  const dst3 = new Uint8Array(9); // 3x1 RGB
  blit(rgb, 2, 1, 3, { left: 0, top: 0, width: 2, height: 1 }, dst3, 3, 1, 1, 0);
  t.same([...dst3], [0, 0, 0, 1, 1, 1, 2, 2, 2]);
});

t.test('overBackground: over a translucent colour and over picture pixels', async (t) => {
  const rgb = Uint8Array.from([200, 0, 0, 200, 0, 0, 200, 0, 0]);
  const alpha = Uint8Array.from([255, 0, 128]);
  const half = overBackground(rgb, alpha, { r: 0, g: 0, b: 200, a: 128 });
  t.same([...half.alpha!], [255, 128, 192]);
  t.same([...half.rgb.subarray(0, 6)], [200, 0, 0, 0, 0, 200]);
  t.ok(half.rgb[6] > 100 && half.rgb[8] > 40 && half.rgb[8] < 100, 'the half-covered pixel mixes both');
  const picture = Uint8Array.from([0, 255, 0, 255, 0, 255, 0, 255, 0, 255, 0, 255]);
  const over = overBackground(rgb, alpha, picture);
  t.equal(over.alpha, null, 'an opaque picture makes an opaque result');
  t.same([...over.rgb.subarray(0, 6)], [200, 0, 0, 0, 255, 0]);
});

t.test('fitArea: remove.bg sizes are areas', async (t) => {
  t.same(fitArea({ width: 1250, height: 800 }, 250_000), { width: 625, height: 400 });
  t.same(fitArea({ width: 500, height: 333 }, 250_000), { width: 500, height: 333 }, 'never enlarged');
  const r = fitArea({ width: 6000, height: 4000 }, 1_500_000);
  t.ok(r.width * r.height <= 1_500_000 && r.width * r.height > 1_490_000);
  t.equal(Math.round((r.width / r.height) * 100), 150);
});

t.test('storedZip writes stored entries any reader finds', async (t) => {
  const zip = storedZip([{ name: 'color.jpg', data: Buffer.from('abc') }, { name: 'alpha.png', data: new Uint8Array([1, 2, 3, 4]) }]);
  const entries = readZip(zip);
  t.same(entries.map((e) => [e.name, e.method, [...e.data]]), [['color.jpg', 0, [97, 98, 99]], ['alpha.png', 0, [1, 2, 3, 4]]]);
  t.same(storedZip([{ name: 'a', data: Buffer.from('x') }]), storedZip([{ name: 'a', data: Buffer.from('x') }]), 'reproducible');
});
