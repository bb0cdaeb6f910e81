import t from 'tap';
import { staleCacheNames } from '../src/toolchain/cache-prune.js';

const P = 'isnet-medium-b6e8497ba978a6f5';
const HOUR = 3_600_000;

t.test('stale names: earlier revisions, other int8 keys, their sidecars and optimised copies, one-file optimised copies, old temporary files and folders', async (t) => {
  const current = [
    `${P}.onnx`,
    `${P}.o1.fp16-to-fp32.onnx`, `${P}.o1.fp16-to-fp32.onnx.sha256`, `${P}.o1.fp16-to-fp32.ort-1.30.0-0771398475.optimized`,
    `${P}.o1.side512.onnx`, `${P}.o1.side512.onnx.sha256`, `${P}.o1.side768.ort-1.30.0-0771398475.optimized`,
    `${P}.int8-aac7b7a7f0.onnx`, `${P}.int8-aac7b7a7f0.onnx.sha256`, `${P}.int8-aac7b7a7f0.ort-1.30.0-0771398475.optimized`,
    `${P}.o1.side512.int8-aac7b7a7f0.onnx`,
    `${P}.o1.fp16-to-fp32.onnx.4242.tmp`, // young: a live process may be writing it
    `${P}.int8-aac7b7a7f0.ort-1.30.0-0771398475.optimized.4243.tmp`, // a young temporary folder likewise
  ];
  const old = [
    `${P}.fp16-to-fp32.onnx`, `${P}.fp16-to-fp32.onnx.sha256`, `${P}.fp16-to-fp32.ort-1.30.0-0771398475.optimized`,
    // the one-file layout of optimised copies, even of current files
    `${P}.o1.fp16-to-fp32.ort-1.30.0-0771398475.optimized.onnx`, `${P}.int8-aac7b7a7f0.ort-1.30.0-0771398475.optimized.onnx`,
    `${P}.side512.onnx`, `${P}.side768.onnx.sha256`,
    `${P}.int8-7355c0be35.onnx`, `${P}.int8-7355c0be35.onnx.sha256`, `${P}.int8-7355c0be35.ort-1.30.0-0771398475.optimized`,
    `${P}.o1.side512.int8-7355c0be35.onnx`,
    `${P}.fp16-to-fp32.ort-1.30.0-0771398475.optimized.onnx.2498.tmp`,
    `${P}.o1.side512.ort-1.30.0-0771398475.optimized.2499.tmp`,
  ];
  const others = ['verified.json', 'isnet-small-0123456789abcdef.fp16-to-fp32.onnx', 'isnet-medium-ffffffffffffffff.fp16-to-fp32.onnx'];
  const age = (name: string) => (/\.(2498|2499)\.tmp$/.test(name) ? 2 * HOUR : 1000);
  const stale = staleCacheNames([...current, ...old, ...others], P, 'o1', () => 'aac7b7a7f0', age);
  t.same(stale.sort(), [...old].sort(), 'exactly the files of earlier versions, and a temporary file a dead process left');
});

t.test('a model run as assembled (no conversion) has no revision in its names: only int8 keys and temporary files age', async (t) => {
  const names = [`${P}.onnx`, `${P}.side512.onnx`, `${P}.side512.onnx.sha256`, `${P}.int8-1111111111.onnx`, `${P}.int8-2222222222.onnx`];
  t.same(staleCacheNames(names, P, null, () => '2222222222', () => 0), [`${P}.int8-1111111111.onnx`]);
});

t.test('a side with calibration data of its own has its own int8 build key', async (t) => {
  const key = (side: number | null) => (side === 768 ? '7777777777' : 'aaaaaaaaaa');
  const names = [
    `${P}.int8-aaaaaaaaaa.onnx`, `${P}.o1.side512.int8-aaaaaaaaaa.onnx`, `${P}.o1.side768.int8-7777777777.onnx`,
    `${P}.o1.side768.int8-7777777777.ort-1.30.0-0771398475.optimized`,
    `${P}.o1.side768.int8-aaaaaaaaaa.onnx`, `${P}.o1.side512.int8-7777777777.onnx`,
  ];
  t.same(staleCacheNames(names, P, 'o1', key, () => 0).sort(), [`${P}.o1.side512.int8-7777777777.onnx`, `${P}.o1.side768.int8-aaaaaaaaaa.onnx`].sort());
});
