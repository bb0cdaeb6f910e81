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

t.test('the options table: every door reads it; errors name the parameter as the door spells it', async (t) => {
  const { OPTION_TABLE, OPTION_PARAMS, LIBRARY_DEFAULTS } = await import('../src/options.js');
  const { removeRequest } = await import('../src/library/options.js');
  const { imageOptionsFromFlags } = await import('../src/commands/image-flags.js');
  t.same([...OPTION_PARAMS], OPTION_TABLE.flatMap((r) => (r.api ? [r.api] : [])));
  for (const name of ['mask', 'alpha', 'refine', 'decontaminate']) t.ok(OPTION_PARAMS.includes(name), `${name} is an API parameter`);
  t.same(
    parseImageOptions({ mask: 'true', alpha: 'HARD', refine: '0', decontaminate: false }, 'api', API_DEFAULTS),
    { size: 'preview', format: 'png', bgColor: null, crop: false, mask: true, alpha: 'hard', refine: false, decontaminate: false },
  );
  const api = t.throws(() => parseImageOptions({ alpha: 'x' }, 'api', API_DEFAULTS)) as unknown as OptionError;
  t.same([api.param, api.message], ['alpha', 'Expected one of soft, hard for alpha but received "x"']);
  const cli = t.throws(() => imageOptionsFromFlags({ bgColor: 'reddish' }, {})) as unknown as OptionError;
  t.same([cli.param, cli.message], ['bg_color', 'Expected transparent, a hex colour such as #ffffff, 0f0 or 81d4fa77, or a CSS colour name for --bg-color but received "reddish"']);
  t.match(imageOptionsFromFlags({ refine: false, alpha: 'hard' }, { quality: 'fast', format: 'webp' }), { size: 'full', format: 'webp', quality: 'fast', refine: false, alpha: 'hard', decontaminate: true, mask: false });
  t.same(removeRequest({}), { ...LIBRARY_DEFAULTS, formatByDefault: true }, 'no format named: an animation becomes animated WebP');
  t.notOk('formatByDefault' in removeRequest({ format: 'png' }), 'a format named is kept, for an animation too (APNG)');
  t.throws(() => removeRequest({ bgColor: 'reddish' }), /for bgColor but received "reddish"/);
  t.match(removeRequest({ cropMargin: '10px 5%', scale: '80%', position: 'center', roi: '0 0 50% 50%', format: 'zip' }), { cropMargin: { top: { value: 10, unit: 'px' } }, scale: 0.8, position: 'center', roi: { x2: { value: 50, unit: '%' } }, format: 'zip' });
  t.throws(() => removeRequest({ scale: '5%' }), /10% to 100%/);
  t.equal(removeRequest({ format: 'raw' }).format, 'raw', 'the library alone gives raw pixels');
});

t.test('stored job params carry a version; rows without one read as before', async (t) => {
  const { JOB_PARAMS_VERSION, readJobParams, writeJobParams } = await import('../src/store/jobs.js');
  const options = parseImageOptions({ size: 'full', mask: true }, 'api', API_DEFAULTS);
  const text = writeJobParams(options);
  t.equal(JSON.parse(text).v, JOB_PARAMS_VERSION);
  t.same(readJobParams(text), options);
  t.same(readJobParams('{"size":"full","format":"png","bgColor":null,"crop":false}'), { size: 'full', format: 'png', bgColor: null, crop: false }, 'version 1');
});
