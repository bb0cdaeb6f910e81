/**
 * Fast lane (docs/testing.md): product photos (docs/product-photos.md) through the v1 API, the
 * server in this process on the stand-in model (a soft ellipse): a sync removal on a fixed canvas
 * with padding, shadow and outline; a job with the same parameters; `add_shadow=true` drawing the
 * float shadow; dpi in the file; and each invalid value or combination answered 400
 * `invalid_request` naming the parameter, with nothing charged.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { balanceOf, bearer, createKey, errorCode, startApi, upload } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';
import { until } from './helpers/process.js';

const coffee = await fs.readFile(path.join(FIXTURES, 'coffee.jpg')); // 600x400
const srv = await startApi(t, ['--rate-limit', '100000']);
const key = await createKey(srv.dataDir);
const remove = (fields: Record<string, string>) => fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(coffee, { size: 'full', ...fields }) });

/** Mean of channel 0 over the rows `y0`..`y1` of the middle third of a raw RGB(A) image. */
function meanBelow(data: Buffer, width: number, channels: number, y0: number, y1: number): number {
  let sum = 0, n = 0;
  for (let y = y0; y < y1; y++) for (let x = Math.floor(width / 3); x < Math.floor((2 * width) / 3); x++) { sum += data[(y * width + x) * channels]; n++; }
  return sum / n;
}

t.test('sync: an exact canvas with padding, a float shadow and an outline', async (t) => {
  const res = await remove({ canvas: '500x500', padding: '10%', shadow: 'float', outline_width: '6px', bg_color: 'white', format: 'png', dpi: '300' });
  t.equal(res.status, 200, res.status === 200 ? '' : await res.text());
  const png = Buffer.from(await res.arrayBuffer());
  const meta = await sharp(png).metadata();
  t.same([meta.width, meta.height, meta.density], [500, 500, 300], 'exactly the canvas, with its dpi');
  const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
  // The stand-in's ellipse fits inside 400 px: white above it, the shadow darkens below it.
  t.ok(meanBelow(data, 500, info.channels, 0, 40) > 250, 'the top padding is white');
  const plain = await remove({ canvas: '500x500', padding: '10%', outline_width: '6px', bg_color: 'white', format: 'png' });
  const p = await sharp(Buffer.from(await plain.arrayBuffer())).raw().toBuffer({ resolveWithObject: true });
  let darkerBelow = 0, darkerAbove = 0, lighter = 0;
  for (let i = 0; i < 500 * 500; i++) {
    const d = p.data[i * p.info.channels] - data[i * info.channels];
    if (d < -1) lighter++;
    else if (d > 1) (i / 500 >= 250 ? darkerBelow++ : darkerAbove++);
  }
  t.ok(darkerBelow > 500, `the float shadow darkens the floor below the subject (${darkerBelow} px)`);
  t.same([darkerAbove, lighter], [0, 0], 'and nothing above it, nothing lighter');
});

t.test('add_shadow=true draws the float shadow; shadow=none draws none', async (t) => {
  const get = async (fields: Record<string, string>) => {
    const res = await remove({ canvas: '400x400', padding: '10%', bg_color: 'white', format: 'png', ...fields });
    t.equal(res.status, 200);
    return Buffer.from(await res.arrayBuffer());
  };
  const float = await get({ shadow: 'float' });
  t.ok(float.equals(await get({ add_shadow: 'true' })), 'add_shadow=true is shadow=float');
  t.ok((await get({})).equals(await get({ add_shadow: 'true', shadow: 'none' })), 'shadow decides over add_shadow');
  t.notOk((await get({})).equals(float), 'and it is drawn');
});

t.test('a job with the same parameters', async (t) => {
  const res = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key), body: upload(coffee, { size: 'full', canvas: '300x200', align: 'left', shadow: 'drop', format: 'png' }) });
  t.equal(res.status, 202, res.status === 202 ? '' : await res.text());
  const { job_id: id } = (await res.json()) as { job_id: string };
  let job: any;
  await until('the job to finish', async () => {
    job = await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json();
    return job.status === 'done' || job.status === 'failed';
  }, 30_000);
  t.equal(job.status, 'done', JSON.stringify(job.error));
  const image = Buffer.from(await (await fetch(job.url, { headers: bearer(key.key) })).arrayBuffer());
  const meta = await sharp(image).metadata();
  t.same([meta.width, meta.height], [300, 200]);
});

t.test('invalid values and combinations: 400 naming the parameter, nothing charged', async (t) => {
  const before = await balanceOf(srv.url, key.key);
  const cases: [Record<string, string>, string][] = [
    [{ canvas: '0x100' }, 'canvas'],
    [{ padding: '60%' }, 'padding'],
    [{ margin: 'wide' }, 'margin'],
    [{ align: 'up' }, 'align'],
    [{ snap_cropped: 'maybe' }, 'snap_cropped'],
    [{ outline_width: '0.5' }, 'outline_width'],
    [{ shadow: 'soft' }, 'shadow'],
    [{ shadow_opacity: '2' }, 'shadow_opacity'],
    [{ shadow_elevation: '0' }, 'shadow_elevation'],
    [{ bg_blur: '0.2' }, 'bg_blur'],
    [{ bg_blur_mode: 'radial' }, 'bg_blur_mode'],
    [{ dpi: '2000' }, 'dpi'],
    [{ max_width: '-1' }, 'max_width'],
    [{ canvas: '400x400', crop: 'true' }, 'crop'],
    [{ canvas: '400x400', max_height: '100' }, 'max_height'],
    [{ bg_blur: 'true', bg_color: 'red' }, 'bg_blur'],
  ];
  for (const [fields, param] of cases) {
    const err = await errorCode(await remove(fields));
    t.same([err.status, err.code], [400, 'invalid_request'], JSON.stringify(fields));
    t.match(err.message, new RegExp(`\\b${param}\\b`), `${JSON.stringify(fields)} names ${param}: ${err.message}`);
  }
  const job = await errorCode(await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key), body: upload(coffee, { shadow: 'sideways' }) }));
  t.same([job.status, job.code], [400, 'invalid_request'], 'a job is refused at submission');
  t.equal(await balanceOf(srv.url, key.key), before, 'nothing charged');
});

t.test('keep_alpha=auto: an input with transparency keeps its alpha and the model does not run', async (t) => {
  // A 200x100 PNG: a red disc on transparency, and the same flattened (opaque).
  const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><circle cx="100" cy="50" r="40" fill="#c02020"/></svg>');
  const translucent = await sharp(svg).png().toBuffer();
  const opaque = await sharp(svg).flatten({ background: '#ffffff' }).png().toBuffer();
  const send = (image: Buffer, fields: Record<string, string>) => fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(image, { size: 'preview', format: 'png', ...fields }) });
  const calls = srv.model!.calls;
  const res = await send(translucent, { keep_alpha: 'auto' });
  t.equal(res.status, 200);
  t.match(res.headers.get('x-cutout-confidence'), /^1(\.0+)?$/, 'its own matte: sure');
  const got = await sharp(Buffer.from(await res.arrayBuffer())).extractChannel(3).raw().toBuffer();
  const want = await sharp(translucent).extractChannel(3).raw().toBuffer();
  t.ok(got.equals(want), 'the alpha is the input\'s');
  t.equal(srv.model!.calls, calls, 'the model did not run');
  const withShadow = await send(translucent, { keep_alpha: 'auto', canvas: '300x300', shadow: 'drop' });
  t.equal(withShadow.status, 200, 'and the product options apply to it');
  t.equal(srv.model!.calls, calls);
  const op = await send(opaque, { keep_alpha: 'auto' }); t.equal(op.status, 200, op.status === 200 ? '' : await op.text());
  t.equal(srv.model!.calls, calls + 1, 'an opaque input goes to the model');
  t.equal((await send(translucent, {})).status, 200);
  t.equal(srv.model!.calls, calls + 2, 'never (the default): the model runs');
  const bad = await errorCode(await send(translucent, { keep_alpha: 'sometimes' }));
  t.match([bad.status, bad.message], [400, /keep_alpha/]);
});

t.test('keep_metadata: the input\'s EXIF (orientation upright) and XMP kept in PNG and JPEG, tagged sRGB; stripped by default', async (t) => {
  const xmp = '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator>cutout-test</dc:creator></rdf:Description></rdf:RDF></x:xmpmeta>';
  const photo = await sharp(coffee).resize(300, 200).withMetadata({ orientation: 6 }).withExifMerge({ IFD0: { Make: 'CutoutCam' } }).withXmp(xmp).jpeg().toBuffer();
  t.equal((await sharp(photo).metadata()).orientation, 6, 'the input is rotated by EXIF');
  for (const format of ['png', 'jpg']) {
    const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(photo, { size: 'preview', format, keep_metadata: 'true', bg_color: 'white' }) });
    t.equal(res.status, 200, format);
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    t.ok(meta.exif?.includes('CutoutCam'), `${format}: EXIF kept`);
    t.equal(meta.orientation, 1, `${format}: upright, as the pixels are`);
    t.same([meta.width, meta.height], [200, 300], `${format}: the pixels were rotated`);
    t.ok(meta.xmp?.toString().includes('cutout-test'), `${format}: XMP kept`);
    t.ok(meta.icc, `${format}: tagged with a colour profile`);
    const plain = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(photo, { size: 'preview', format, bg_color: 'white' }) });
    const stripped = await sharp(Buffer.from(await plain.arrayBuffer())).metadata();
    t.same([stripped.exif, stripped.xmp], [undefined, undefined], `${format}: stripped without it`);
  }
});
