/**
 * A fixed-bin histogram of activation values, for the int8 calibration's percentile ranges
 * (bench/calibrate-int8.ts). The activations of one calibration run are tens of millions of
 * values per tensor: too many to keep or sort, so they are counted into bins over a range known
 * from a first pass (the extremes over all photos), and quantiles are read from the counts.
 */
export class Histogram {
  readonly counts: Float64Array;
  private readonly perUnit: number;

  /** `lo`..`hi`: the values' range (values outside it count in the end bins). */
  constructor(readonly lo: number, readonly hi: number, bins = 8192) {
    if (!(hi > lo)) hi = lo + 1; // a constant tensor: one range of width 1 holds it
    this.hi = hi;
    this.counts = new Float64Array(bins);
    this.perUnit = bins / (hi - lo);
  }

  add(values: ArrayLike<number>): void {
    const { counts, lo, perUnit } = this;
    const last = counts.length - 1;
    for (let i = 0; i < values.length; i++) {
      const bin = Math.floor((values[i] - lo) * perUnit);
      counts[bin < 0 ? 0 : bin > last ? last : bin]++;
    }
  }

  /**
   * The value below which the share `q` (0..1) of the counted values lie, rounded up to its bin's
   * upper edge (so a quantile never cuts into the bin that holds it).
   */
  quantile(q: number): number {
    const bin = this.binHolding(q, (seen, wanted) => seen >= wanted);
    return bin === null ? this.hi : this.lo + (bin + 1) * this.width();
  }

  /** Like `quantile`, from the bottom: the lower edge of the bin holding the share `q`. */
  lowerQuantile(q: number): number {
    const bin = this.binHolding(q, (seen, wanted) => seen > wanted);
    return bin === null ? this.lo : this.lo + bin * this.width();
  }

  private width(): number {
    return (this.hi - this.lo) / this.counts.length;
  }

  /** The first bin at which the running count passes `reached` for the share `q`; null when nothing was counted. */
  private binHolding(q: number, reached: (seen: number, wanted: number) => boolean): number | null {
    const total = this.counts.reduce((a, b) => a + b, 0);
    if (total === 0) return null;
    const wanted = q * total;
    let seen = 0;
    for (let bin = 0; bin < this.counts.length; bin++) {
      seen += this.counts[bin];
      if (reached(seen, wanted)) return bin;
    }
    return null;
  }
}
