/**
 * Product photos (docs/product-photos.md) without the model: the parsers of the new options, the
 * placement's box arithmetic on tiny boxes, and compose() on small synthetic photos (a flat
 * subject on a striped background): the exact canvas, padding within 2 px, snapped cropped
 * sides, alignment, the shadow only under and beside the subject and bounded by its opacity, the
 * outline ring's width and colour, the background blur, dpi in the file, and the combinations
 * refused with the parameter named.
 */
import t from 'tap';
import sharp from 'sharp';
import { parseAlign, parseCanvas, parseOutlineWidth, parseSpacing } from '../src/layout-options.js';
import { checkImageOptions, CLI_DEFAULTS, OptionError, parseImageOptions, parseShadow } from '../src/options.js';
import { removeRequest } from '../src/library/options.js';
import { compose, shadowModeOf, type ComposeOptions } from '../src/pipeline/compose.js';
import { boundingBox } from '../src/pipeline/matte.js';
import { blurPlane, croppedSides, distanceTo, planPlacement, shadowMask } from '../src/pipeline/product.js';

const pct = (value: number) => ({ value, unit: '%' as const });
const px = (value: number) => ({ value, unit: 'px' as const });
const all = <T>(v: T) => ({ top: v, right: v, bottom: v, left: v });

/** A `w` x `h` photo: vertical stripes (detail) behind an opaque square subject of colour (200, 40, 40) at `box`. */
function photo(w: number, h: number, box: { left: number; top: number; width: number; height: number }) {
  const rgb = new Uint8Array(w * h * 3);
  const alpha = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      const inside = x >= box.left && x < box.left + box.width && y >= box.top && y < box.top + box.height;
      const v = (x >> 1) % 2 ? 230 : 30;
      rgb.set(inside ? [200, 40, 40] : [v, v, v], i * 3);
      alpha[i] = inside ? 255 : 0;
    }
  }
  return { rgb, alpha };
}

async function run(w: number, h: number, box: Parameters<typeof photo>[2], opts: Partial<ComposeOptions>) {
  const { rgb, alpha } = photo(w, h, box);
  const r = await compose(rgb, alpha, w, h, { format: 'raw', bgColor: null, crop: false, ...opts });
  const a = new Uint8Array(r.width * r.height);
  for (let i = 0; i < a.length; i++) a[i] = r.data[i * 4 + 3];
  return { ...r, a, px: (x: number, y: number) => [...r.data.subarray((y * r.width + x) * 4, (y * r.width + x) * 4 + 4)] };
}

t.test('parsers: canvas, padding and margin, align, outline width, shadow, bounds', async (t) => {
  t.same(parseCanvas('1000x1000', 'canvas', 'api'), { width: 1000, height: 1000 });
  t.equal(parseCanvas('Original', 'canvas', 'api'), 'original');
  t.equal(parseCanvas('subject', 'canvas', 'api'), 'subject');
  for (const bad of ['0x10', '10x', '20000x10', '6000x6000', 'big', '']) t.throws(() => parseCanvas(bad, 'canvas', 'cli'), /--canvas/, `canvas ${bad}`);
  t.same(parseSpacing('10%', 'padding', 'api'), all(pct(10)));
  t.same(parseSpacing('0.1 40px', 'padding', 'api'), { top: { value: 0.1, unit: 'ratio' }, right: px(40), bottom: { value: 0.1, unit: 'ratio' }, left: px(40) });
  t.same(parseSpacing('1px 2px 3px', 'margin', 'api'), { top: px(1), right: px(2), bottom: px(3), left: px(2) });
  for (const bad of ['50%', '0.5', '1 2 3 4 5', '-1px', 'wide']) t.throws(() => parseSpacing(bad, 'padding', 'api'), /padding/, `padding ${bad}`);
  t.same(parseAlign('bottom left', 'align', 'api'), { x: 0, y: 1 });
  t.same(parseAlign('left bottom', 'align', 'api'), { x: 0, y: 1 });
  t.same(parseAlign('top', 'align', 'api'), { x: 0.5, y: 0 });
  t.throws(() => parseAlign('left right', 'align', 'api'), /align/);
  t.same(parseOutlineWidth('8px', 'outline_width', 'api'), px(8));
  t.same(parseOutlineWidth('0.02', 'outline_width', 'api'), { value: 0.02, unit: 'ratio' });
  t.throws(() => parseOutlineWidth('0.2', 'outline_width', 'api'), /outline_width/);
  t.equal(parseShadow(true, 'shadow', 'cli'), 'float', 'a bare --shadow is float');
  t.equal(parseShadow('true', 'shadow', 'api'), 'float');
  t.equal(parseShadow('cast', 'shadow', 'api'), 'cast');
  t.throws(() => parseShadow('soft', 'shadow', 'cli'), /--shadow/);
  const bad: Record<string, string> = { shadow_opacity: '1.5', shadow_softness: '-0.1', shadow_elevation: '90', dpi: '71', bg_blur: '0.06', bg_blur_mode: 'radial', max_width: '0', outline_blur: '0.03', shadow_color: 'transparent', outline_color: 'nope' };
  for (const [param, value] of Object.entries(bad)) {
    const err = (() => { try { parseImageOptions({ [param]: value }, 'api', CLI_DEFAULTS); } catch (e) { return e; } })();
    t.ok(err instanceof OptionError && err.param === param && err.code === 'invalid_request' && err.message.includes(param), `${param}=${value} is refused naming it`);
  }
});

t.test('add_shadow=true and a bare shadow draw float; shadow decides over add_shadow', async (t) => {
  t.equal(shadowModeOf(parseImageOptions({ add_shadow: 'true' }, 'api', CLI_DEFAULTS)), 'float');
  t.equal(shadowModeOf(parseImageOptions({ add_shadow: 'true', shadow: 'drop' }, 'api', CLI_DEFAULTS)), 'drop');
  t.equal(shadowModeOf(parseImageOptions({ add_shadow: 'false' }, 'api', CLI_DEFAULTS)), 'none');
  t.equal(shadowModeOf({}), 'none');
  t.equal(shadowModeOf({ shadow: true as never }), 'float', 'a job stored when shadow was a boolean');
  t.equal(removeRequest({ shadow: true }).shadow, 'float', 'the library\'s shadow: true');
});

t.test('combinations: remove.bg\'s layout with a canvas, max_* with WxH, bg_blur with a background', async (t) => {
  const refuse = (raw: Record<string, unknown>, param: string) => {
    const err = (() => { try { parseImageOptions(raw, 'api', CLI_DEFAULTS); } catch (e) { return e; } })();
    t.ok(err instanceof OptionError && err.param === param, `${JSON.stringify(raw)} refused naming ${param}: ${(err as Error)?.message}`);
  };
  refuse({ canvas: '100x100', crop: 'true' }, 'crop');
  refuse({ padding: '10%', scale: '50%' }, 'scale');
  refuse({ align: 'top', position: 'center' }, 'position');
  refuse({ canvas: '100x100', max_width: '50' }, 'max_width');
  refuse({ bg_blur: 'true', bg_color: 'white' }, 'bg_blur');
  t.doesNotThrow(() => parseImageOptions({ canvas: 'subject', max_width: '50', crop: 'false' }, 'api', CLI_DEFAULTS));
  t.doesNotThrow(() => parseImageOptions({ crop: 'true', crop_margin: '10px', outline_width: '4px', shadow: 'drop' }, 'api', CLI_DEFAULTS), 'outline and shadow go with remove.bg\'s layout');
  t.throws(() => checkImageOptions({ canvas: 'subject', crop: true }, 'cli'), /--crop .*--canvas/);
  t.throws(() => removeRequest({ canvas: '100x100', maxHeight: 5 }), /maxHeight/);
  t.equal(removeRequest({ snapCropped: true }).snapCropped, undefined, 'snap_cropped=true is what absent means');
  t.equal(removeRequest({ snapCropped: false }).snapCropped, false);
});

t.test('placement arithmetic: fit, padding, margin, alignment, cropped sides', async (t) => {
  const s = { left: 20, top: 10, width: 20, height: 10 };
  let p = planPlacement(s, 100, 100, { canvas: { width: 100, height: 100 }, padding: all(pct(10)) });
  t.same(p.dest, { left: 10, top: 30, width: 80, height: 40 }, 'fits the width inside 10 % padding, centred');
  p = planPlacement(s, 100, 100, { canvas: { width: 100, height: 100 }, padding: all(pct(10)), align: { x: 0.5, y: 1 } });
  t.same(p.dest, { left: 10, top: 50, width: 80, height: 40 }, 'bottom: at the padding');
  p = planPlacement(s, 100, 100, { canvas: { width: 100, height: 100 }, padding: all(pct(10)), margin: all(px(5)), align: { x: 0, y: 0 } });
  t.same(p.dest, { left: 15, top: 15, width: 70, height: 35 }, 'margin outside the padding');
  // A portrait cut at the photo's bottom: no padding there, pulled down to the canvas's edge.
  const cut = { left: 30, top: 20, width: 40, height: 80 };
  t.same(croppedSides(cut, 100, 100), { top: false, right: false, bottom: true, left: false });
  p = planPlacement(cut, 100, 100, { canvas: { width: 200, height: 200 }, padding: all(pct(10)) });
  t.same(p.dest, { left: 55, top: 20, width: 90, height: 180 }, 'bottom snapped: 180 px tall from y 20 to the edge');
  p = planPlacement(cut, 100, 100, { canvas: { width: 200, height: 200 }, padding: all(pct(10)), margin: all(px(4)) });
  t.equal(p.dest.top + p.dest.height, 196, 'snapped to the margin, never into it');
  p = planPlacement(cut, 100, 100, { canvas: { width: 200, height: 200 }, padding: all(pct(10)), snapCropped: false });
  t.same(p.dest, { left: 60, top: 20, width: 80, height: 160 }, 'snap_cropped=false keeps the padding');
  p = planPlacement(s, 100, 100, { canvas: { width: 100, height: 100 }, padding: all(pct(10)), scaling: 'fill' });
  t.same(p.dest, { left: -30, top: 10, width: 160, height: 80 }, 'fill: covers the room (80 px tall), centred, cut at the sides');
  p = planPlacement(s, 100, 100, { canvas: 'subject', padding: all(px(5)) });
  t.same([p.width, p.height, p.dest], [30, 20, { left: 5, top: 5, width: 20, height: 10 }], 'subject canvas: the box plus padding');
  p = planPlacement(s, 100, 100, { canvas: 'subject', padding: all(px(5)), maxWidth: 15 });
  t.same([p.width, p.height], [15, 10], 'bounded by max_width, aspect kept');
  p = planPlacement(s, 100, 100, { maxWidth: 50 });
  t.same([p.width, p.height, p.dest], [50, 50, { left: 10, top: 5, width: 10, height: 5 }], 'max_* alone scales the photo, the subject in place');
  p = planPlacement(s, 100, 100, { canvas: { width: 100, height: 100 }, outlineWidth: px(5) });
  t.same(p.dest, { left: 5, top: 28, width: 90, height: 45 }, 'the outline is part of the subject: room for it');
});

t.test('compose: the exact canvas, padding within 2 px, alignment', async (t) => {
  const r = await run(120, 80, { left: 30, top: 20, width: 40, height: 30 }, { canvas: { width: 200, height: 150 }, padding: all(pct(10)) });
  t.same([r.width, r.height], [200, 150], 'exactly the canvas asked');
  const b = boundingBox(r.a, r.width, r.height, 128)!;
  // Fit: width room 160, height room 120 -> scale min(4, 4) = 4: 160 x 120 at (20, 15).
  for (const [got, want, side] of [[b.left, 20, 'left'], [b.top, 15, 'top'], [r.width - b.left - b.width, 20, 'right'], [r.height - b.top - b.height, 15, 'bottom']] as const) {
    t.ok(Math.abs(got - want) <= 2, `${side} padding ${got} px, want ${want} within 2`);
  }
  t.same(r.px(100, 75), [200, 40, 40, 255], 'the subject\'s colour, opaque');
  t.equal(r.px(5, 5)[3], 0, 'the canvas around it is transparent');
  const left = await run(120, 80, { left: 30, top: 20, width: 20, height: 30 }, { canvas: { width: 200, height: 150 }, padding: all(px(10)), align: { x: 0, y: 1 } });
  const lb = boundingBox(left.a, left.width, left.height, 128)!;
  t.ok(Math.abs(lb.left - 10) <= 2 && Math.abs(left.height - lb.top - lb.height - 10) <= 2, `bottom left: ${JSON.stringify(lb)}`);
});

t.test('compose: a cropped side snaps to the canvas\'s edge, the others keep their padding', async (t) => {
  // The subject runs off the photo's bottom.
  const r = await run(100, 100, { left: 30, top: 40, width: 40, height: 60 }, { canvas: { width: 300, height: 300 }, padding: all(pct(10)) });
  const b = boundingBox(r.a, r.width, r.height, 128)!;
  t.equal(b.top + b.height, 300, 'bottom: touches the canvas\'s edge');
  t.ok(Math.abs(b.top - 30) <= 2, `top keeps its 10 % padding (${b.top})`);
  const off = await run(100, 100, { left: 30, top: 40, width: 40, height: 60 }, { canvas: { width: 300, height: 300 }, padding: all(pct(10)), snapCropped: false });
  const ob = boundingBox(off.a, off.width, off.height, 128)!;
  t.ok(Math.abs(300 - ob.top - ob.height - 30) <= 2, 'snap_cropped=false: the bottom keeps its padding');
});

t.test('compose: the shadow lies under and beside the subject, never over it, its opacity bounded', async (t) => {
  const box = { left: 40, top: 20, width: 40, height: 40 };
  const plain = await run(120, 100, box, { bgColor: { r: 255, g: 255, b: 255 } });
  for (const shadow of ['drop', 'float', 'cast'] as const) {
    for (const opacity of [0.3, 1]) {
      const r = await run(120, 100, box, { shadow, shadowOpacity: opacity, bgColor: { r: 255, g: 255, b: 255 } });
      let changed = 0, overSubject = 0, above = 0, darkest = 255;
      for (let y = 0; y < 100; y++) {
        for (let x = 0; x < 120; x++) {
          const i = (y * 120 + x) * 4;
          const inside = x >= box.left && x < box.left + box.width && y >= box.top && y < box.top + box.height;
          if (r.data[i] === plain.data[i]) continue;
          changed++;
          if (inside) overSubject++;
          if (y < box.top) above++;
          darkest = Math.min(darkest, r.data[i]);
        }
      }
      t.ok(changed > 50, `${shadow} ${opacity}: a shadow is drawn (${changed} px)`);
      t.equal(overSubject, 0, `${shadow} ${opacity}: no pixel of the opaque subject changes`);
      t.equal(above, 0, `${shadow} ${opacity}: nothing above the subject (light from above)`);
      t.ok(darkest >= Math.floor(255 * (1 - opacity)) - 1, `${shadow} ${opacity}: at most the opacity dark (darkest ${darkest})`);
    }
  }
  const transparent = await run(120, 100, box, { shadow: 'drop', shadowOpacity: 0.4 });
  t.ok(Math.max(...[...transparent.a].filter((_, i) => (i % 120 < box.left || i % 120 >= box.left + box.width || Math.floor(i / 120) >= box.top + box.height))) <= Math.round(0.4 * 255) + 1, 'on a transparent canvas the shadow\'s alpha is at most its opacity');
  t.same(transparent.foreground, box, 'the shadow is not part of the subject\'s box');
  const side = await run(160, 100, box, { shadow: 'cast', shadowDirection: 90, bgColor: { r: 255, g: 255, b: 255 } });
  let leftOf = 0, rightOf = 0;
  for (let y = 0; y < 100; y++) for (let x = 0; x < 160; x++) if (side.data[(y * 160 + x) * 4] < 250) (x < box.left ? leftOf++ : x >= box.left + box.width ? rightOf++ : 0);
  t.ok(leftOf > 20 * Math.max(1, rightOf), `cast, light from the right: the shadow falls left (${leftOf} px left, ${rightOf} right)`);
  const cut = shadowMask(new Uint8Array(16).fill(255), 4, 4, { kind: 'drop', opacity: 0.5, softness: 0, direction: 0, elevation: 45 })!;
  t.equal(cut.length, 16, 'cut at the canvas\'s edge: the canvas does not grow');
});

t.test('compose: the outline ring\'s width and colour', async (t) => {
  const box = { left: 40, top: 40, width: 40, height: 40 };
  const r = await run(120, 120, box, { outlineWidth: px(6), outlineColor: { r: 0, g: 0, b: 255 } });
  t.same(r.px(40 - 3, 60), [0, 0, 255, 255], 'inside the ring: its colour, opaque');
  t.same(r.px(40 - 6, 60), [0, 0, 255, 255], 'at its width: still the ring');
  t.equal(r.px(40 - 8, 60)[3], 0, 'past it: transparent');
  t.same(r.px(60, 60), [200, 40, 40, 255], 'the subject stays on top');
  const white = await run(120, 120, box, { outlineWidth: px(6), bgColor: { r: 0, g: 0, b: 0 } });
  t.same(white.px(36, 60).slice(0, 3), [255, 255, 255], 'white by default');
  const d = distanceTo((i) => i === 12, 5, 5);
  t.equal(d[14], 2);
  t.ok(Math.abs(d[0] - Math.sqrt(8)) < 1e-6, 'the distance is Euclidean');
});

t.test('compose: bg_blur lowers the background\'s detail and leaves the subject', async (t) => {
  const box = { left: 40, top: 30, width: 40, height: 40 };
  const { rgb } = photo(120, 100, box);
  const detail = (data: Uint8Array, channels: number) => {
    let sum = 0;
    for (let x = 1; x < 30; x++) sum += Math.abs(data[(10 * 120 + x) * channels] - data[(10 * 120 + x - 1) * channels]);
    return sum;
  };
  for (const mode of ['gaussian', 'bokeh'] as const) {
    const r = await run(120, 100, box, { bgBlur: 0.03, bgBlurMode: mode });
    t.ok(r.a.every((v) => v === 255), `${mode}: the output is opaque`);
    t.ok(detail(r.data, 4) < detail(rgb, 3) / 4, `${mode}: the stripes are blurred (${detail(r.data, 4)} against ${detail(rgb, 3)})`);
    t.same(r.px(60, 50).slice(0, 3), [200, 40, 40], `${mode}: the subject is sharp`);
    const near = r.px(36, 50);
    t.ok(near[1] > 60, `${mode}: no red halo of the subject just beside it (${near})`);
  }
  const flat = blurPlane(new Float32Array(25).fill(3), 5, 5, 2);
  t.ok(flat.every((v) => Math.abs(v - 3) < 1e-5), 'a blur keeps a flat plane flat');
});

t.test('compose: dpi is written into PNG and JPEG', async (t) => {
  const { rgb, alpha } = photo(40, 30, { left: 10, top: 10, width: 10, height: 10 });
  for (const format of ['png', 'jpg'] as const) {
    const r = await compose(Uint8Array.from(rgb), Uint8Array.from(alpha), 40, 30, { format, bgColor: null, crop: false, dpi: 300 });
    t.equal((await sharp(r.data).metadata()).density, 300, `${format}: 300 dpi`);
  }
  const none = await compose(rgb, alpha, 40, 30, { format: 'png', bgColor: null, crop: false });
  t.not((await sharp(none.data).metadata()).density, 300, 'absent: none written');
});

t.test('a scaled subject\'s matte is resized with its colours (remove.bg\'s scale)', async (t) => {
  const r = await run(100, 100, { left: 40, top: 40, width: 10, height: 10 }, { scale: 0.5 });
  t.same(boundingBox(r.a, 100, 100, 128), { left: 25, top: 25, width: 50, height: 50 }, 'the matte grew with the colours');
});

t.test('compose: scaling=fill covers the room, the overflow cut at the canvas', async (t) => {
  const r = await run(120, 80, { left: 30, top: 30, width: 40, height: 20 }, { canvas: { width: 100, height: 100 }, scaling: 'fill' });
  t.same([r.width, r.height], [100, 100]);
  t.same(boundingBox(r.a, 100, 100, 128), { left: 0, top: 0, width: 100, height: 100 }, 'the subject covers the whole canvas');
});
