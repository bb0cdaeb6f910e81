import t from 'tap';
import { halfBytesToFloatBytes } from '../src/pipeline/convert.js';

t.test('fp16 bits become the same numbers in fp32', async (t) => {
  const halves = [0x0000, 0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x8000];
  const bytes = Buffer.alloc(halves.length * 2);
  halves.forEach((h, i) => bytes.writeUInt16LE(h, i * 2));
  const out = halfBytesToFloatBytes(bytes);
  const floats = Array.from({ length: halves.length }, (_, i) => out.readFloatLE(i * 4));
  t.same(floats.slice(0, 3), [0, 1, -2]);
  t.ok(Math.abs(floats[3] - 0.33325) < 1e-4, 'one third, rounded to half precision');
  t.equal(floats[4], 65504, 'largest half');
  t.equal(floats[5], 2 ** -24, 'smallest subnormal');
  t.equal(floats[6], Infinity);
  t.equal(floats[7], -Infinity);
  t.ok(Object.is(floats[8], -0), 'negative zero');
});
