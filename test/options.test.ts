import t from 'tap';
import { parseColor, parseImageOptions, API_DEFAULTS, CLI_DEFAULTS, colorToHex, OptionError } from '../src/options.js';

t.test('parseColor', async (t) => {
  t.equal(parseColor('transparent', 'api'), null);
  t.same(parseColor('#ff8000', 'api'), { r: 255, g: 128, b: 0 });
  t.same(parseColor('0F0', 'api'), { r: 0, g: 255, b: 0 });
  t.throws(() => parseColor('reddish', 'api'), /Expected transparent, a hex colour .* for bg_color but received "reddish"/);
  t.same(parseColor('red', 'api'), { r: 255, g: 0, b: 0 });
  t.same(parseColor('Green', 'api'), { r: 0, g: 128, b: 0 });
  t.same(parseColor('81d4fa77', 'api'), { r: 0x81, g: 0xd4, b: 0xfa, a: 0x77 });
  t.same(parseColor('#f008', 'api'), { r: 255, g: 0, b: 0, a: 0x88 });
  t.same(parseColor('ffffffff', 'api'), { r: 255, g: 255, b: 255 }, 'an opaque alpha is no alpha');
  t.equal(parseColor('00000000', 'api'), null, 'alpha 0 is transparent (removd sends it)');
  t.equal(colorToHex({ r: 1, g: 2, b: 255, a: 0x80 }), '#0102ff80');
  t.throws(() => parseColor('#12345', 'cli'), /for --bg-color/);
  t.equal(colorToHex({ r: 1, g: 2, b: 255 }), '#0102ff');
});

t.test('parseImageOptions applies defaults and validates', async (t) => {
  t.same(parseImageOptions({}, 'api', API_DEFAULTS), { size: 'preview', format: 'png', bgColor: null, crop: false });
  t.equal(parseImageOptions({}, 'cli', CLI_DEFAULTS).size, 'full');
  const o = parseImageOptions({ size: 'AUTO', format: 'jpeg', crop: 'true', type: 'person', bg_color: 'fff' }, 'api', API_DEFAULTS);
  t.same(o, { size: 'auto', format: 'jpg', crop: true, type: 'person', bgColor: { r: 255, g: 255, b: 255 } });
  const err = t.throws(() => parseImageOptions({ size: 'huge' }, 'api', API_DEFAULTS)) as unknown as OptionError;
  t.equal(err.code, 'invalid_request');
  t.equal(err.param, 'size');
  t.throws(() => parseImageOptions({ crop: 'yes' }, 'api', API_DEFAULTS), /true or false/);
});
