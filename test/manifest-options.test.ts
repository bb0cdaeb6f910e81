/**
 * The manifest's "options that change the output" are read off the options table (issue 42):
 * every row with changesOutput is recorded, no other row is, a made-up row reaches the manifest
 * without a change to manifest.ts, and the lines come out as manifests written before the table
 * was read (these literals) so that an old manifest still matches a rerun.
 */
import t from 'tap';
import { outputOptions } from '../src/commands/manifest.js';
import { CLI_DEFAULTS, OPTION_TABLE, parseImageOptions, type OptionRow } from '../src/options.js';

const everyOption = {
  ...parseImageOptions({
    size: 'full', format: 'webp', bg_color: '#ff000080', crop: 'true', quality: 'fast', precision: 'int8', mask: 'true', alpha: 'hard',
    refine: 'false', decontaminate: 'false', crop_margin: '10px 5%', roi: '1% 2% 90% 80%', scale: '80%', position: '50% 100%',
    bg_image_url: 'https://example.com/y.jpg', type: 'person', add_shadow: 'true',
  }, 'api', CLI_DEFAULTS),
  bgImageData: Buffer.from('abc'),
};
/** Every option of product photos too (some of which cannot go with remove.bg's layout in one request: merged here). */
const everyProductOption = {
  ...everyOption,
  ...parseImageOptions({
    keep_alpha: 'auto', canvas: 'subject', max_width: '800', max_height: '600', padding: '10%', margin: '5px', align: 'bottom left', scaling: 'fill', snap_cropped: 'false',
    outline_width: '8px', outline_color: 'black', outline_blur: '0.01', shadow: 'cast', shadow_opacity: '0.4', shadow_softness: '0.2',
    shadow_direction: '30', shadow_elevation: '20', shadow_color: '#203040', bg_blur: '0.02', bg_blur_mode: 'bokeh', dpi: '300', keep_metadata: 'true', animation: 'first',
  }, 'api', {} as never),
};

t.test('lines as manifests wrote them before: every option given, and a plain CLI run', async (t) => {
  t.same(outputOptions('isnet', everyOption), {
    model: 'isnet', size: 'full', format: 'webp', bg_color: '#ff000080', crop: true, quality: 'fast', precision: 'int8', mask: true, alpha: 'hard',
    refine: false, decontaminate: false, crop_margin: '10px 5% 10px 5%', roi: '1% 2% 90% 80%', scale: '80%', position: '50% 100%',
    bg_image_sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', add_shadow: true,
  }, 'add_shadow=true now draws a shadow, so it is recorded');
  t.same(outputOptions('isnet', everyProductOption), {
    ...outputOptions('isnet', everyOption),
    keep_alpha: 'auto', canvas: 'subject', max_width: '800', max_height: '600', padding: '10% 10% 10% 10%', margin: '5px 5px 5px 5px', align: 'bottom left', scaling: 'fill', snap_cropped: false,
    outline_width: '8px', outline_color: '#000000', outline_blur: '0.01', shadow: 'cast', shadow_opacity: '0.4', shadow_softness: '0.2',
    shadow_direction: '30', shadow_elevation: '20', shadow_color: '#203040', bg_blur: '0.02', bg_blur_mode: 'bokeh', dpi: '300', keep_metadata: true, animation: 'first',
  }, 'product photos: each option by its text');
  t.same(outputOptions('isnet', { ...CLI_DEFAULTS, format: 'png' }), {
    model: 'isnet', size: 'full', format: 'png', bg_color: null, crop: false, quality: 'best', precision: 'auto', mask: false, alpha: 'soft', refine: true, decontaminate: true,
  }, 'options never given are recorded by what absent means, the layout options left out');
});

t.test('every row that changes the output is recorded, and no other', async (t) => {
  const recorded = Object.keys(outputOptions('isnet', everyProductOption));
  for (const row of OPTION_TABLE) {
    const name = row.record?.name ?? row.api ?? row.key;
    t.equal(recorded.includes(name), row.changesOutput, `${row.key}: ${row.changesOutput ? 'recorded' : 'not recorded'} as ${name}`);
  }
  const other = outputOptions('isnet', { ...everyOption, position: 'center', bgImageData: Buffer.from('abd') });
  t.not(other.position, outputOptions('isnet', everyOption).position, 'another value, another record: a rerun redoes it');
  t.not(other.bg_image_sha256, outputOptions('isnet', everyOption).bg_image_sha256, 'another background picture, another record');
  const shadow = (mode: string) => outputOptions('isnet', { ...CLI_DEFAULTS, ...parseImageOptions({ shadow: mode }, 'api', {} as never), format: 'png' });
  t.not(shadow('drop').shadow, shadow('float').shadow, 'another shadow, another record: a rerun redoes the photo');
});

t.test('a new row with changesOutput reaches the manifest with no change to it', async (t) => {
  const sparkle = { ...OPTION_TABLE[0], key: 'sparkle', api: 'sparkle', changesOutput: true, record: undefined } as unknown as OptionRow;
  const hint = { ...OPTION_TABLE[0], key: 'hint', api: 'hint', changesOutput: false, record: undefined } as unknown as OptionRow;
  const table = [...OPTION_TABLE, sparkle, hint];
  const line = outputOptions('isnet', { ...everyOption, sparkle: 'gold', hint: 'x' } as never, table);
  t.equal(line.sparkle, 'gold', 'the new option is compared on reruns');
  t.notOk('hint' in line, 'a row that changes nothing is not');
  t.notOk('sparkle' in outputOptions('isnet', everyOption, table), 'absent, and no `absent` in its row: left out, so older lines still match');
});
