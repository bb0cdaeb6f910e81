/**
 * The calibration histogram (src/toolchain/histogram.ts) and the percentile ranges read from a
 * calibration file (selectRanges): pure functions, checked on values whose answer is known.
 */
import t from 'tap';
import { Histogram } from '../src/toolchain/histogram.js';
import { CALIBRATION_PERCENTILE, selectRanges, type CalibrationFile } from '../src/toolchain/int8.js';

t.test('quantiles of a uniform spread land on the bin edge that holds them', async (t) => {
  const h = new Histogram(0, 100, 100);
  h.add(Float32Array.from({ length: 10_000 }, (_, i) => i / 100)); // 0.00 .. 99.99, 100 per bin
  t.equal(h.quantile(0.5), 50, 'the median: the top edge of bin 49');
  t.equal(h.quantile(0.999), 100);
  t.equal(h.quantile(0.01), 1);
  t.equal(h.lowerQuantile(0.01), 1, 'from the bottom: the lower edge of the first bin past 1 %');
  t.equal(h.lowerQuantile(0), 0);
});

t.test('a heavy tail: the 99.99th percentile ignores a few outliers the extremes would follow', async (t) => {
  // A million small activations and 50 huge ones, as ISNet's decoder inputs look (README, "int8").
  const values = new Float32Array(1_000_050);
  for (let i = 0; i < 1_000_000; i++) values[i] = (i % 1000) / 100; // 0 .. 9.99
  values.fill(400, 1_000_000);
  const h = new Histogram(0, 400, 8192);
  h.add(values);
  const p = h.quantile(0.9999);
  t.ok(p >= 9.99 && p < 10.1, `the 99.99th percentile ${p} sits at the top of the common values`);
  t.equal(h.quantile(1), 400, 'the whole share reaches the outliers');
});

t.test('values outside the range count in the end bins; an empty or constant tensor is harmless', async (t) => {
  const h = new Histogram(-1, 1, 4);
  h.add([-5, -1, 0.1, 7]);
  t.same([...h.counts], [2, 0, 1, 1]);
  t.equal(new Histogram(0, 1).quantile(0.9999), 1, 'nothing counted: the top of the range');
  const flat = new Histogram(0, 0, 16);
  flat.add([0, 0, 0]);
  t.ok(flat.quantile(0.9999) > 0, 'a constant tensor still gets a range of positive width');
});

t.test('selectRanges: each method reads its own figures; percentile needs data measured at our percentile', async (t) => {
  const file: CalibrationFile = {
    model: 'm', fp32Sha256: 'x', photos: ['a.jpg'], percentile: CALIBRATION_PERCENTILE,
    ranges: { x: { min: -9, max: 400, meanMin: -6, meanMax: 130, percentileMin: -3, percentileMax: 16 } },
  };
  t.same(selectRanges(file, 'minmax').x, { min: -9, max: 400 });
  t.same(selectRanges(file, 'mean').x, { min: -6, max: 130 });
  t.same(selectRanges(file, 'percentile').x, { min: -3, max: 16 });
  const old: CalibrationFile = { ...file, percentile: undefined };
  t.throws(() => selectRanges(old, 'percentile'), /no 99\.99 percentile ranges; run npm run calibrate:int8/);
  t.same(selectRanges(old, 'mean').x, { min: -6, max: 130 }, 'older files still serve the other methods');
});
