/**
 * Progress for `cutout remove`: an ora spinner on a terminal, plain lines on stderr when piped,
 * JSON lines on stdout with --json. Failures are always named on stderr, one line each.
 */
import type { Ora } from 'ora';
import { RESULT_FIELDS, resultJson, type ResultFieldTable } from '../result-fields.js';
import { oneLine } from '../errors.js';
import type { PreparationEvent } from '../toolchain/weights.js';
import type { ItemReport } from './remove-item.js';

export interface Reporter {
  start(input: string): void;
  /** `silent`: the JSON line only (a batch counts its unchanged inputs in one line instead). */
  done(report: ItemReport, opts?: { silent?: boolean }): void;
  /**
   * The summary line: a batch's own (on stderr, whatever the progress display), or on a terminal the
   * count of a single run (ora's, once its spinner is loaded). `failed`: the batch's own count of
   * inputs failed (an input the watcher redid counts by its last outcome), for the spinner's mark.
   */
  finish(batchSummary?: string, failed?: number): Promise<void>;
  /** A model file being built on first use: one line once, and the step on the spinner. */
  preparation(event: PreparationEvent): void;
}

/**
 * An input's `--json` line: the contract's keys on every line (input, output, width, height, ms,
 * error, credits_charged: 0 for a local run, a skipped input or a failure), then a done input's
 * result fields under their JSON keys (the table's; its `width` and `height` are the same numbers).
 */
export function jsonLine(r: ItemReport, table: ResultFieldTable = RESULT_FIELDS): Record<string, unknown> {
  const { fields, review, ...line } = r;
  return { ...line, ...resultJson(r.error ? null : fields, table), credits_charged: r.credits_charged ?? 0, ...(review ? { review: true } : {}) };
}

export function createReporter(opts: { total: number; json: boolean; quiet: boolean }): Reporter {
  // A terminal that reports 0 columns (`script`, `docker -t` before its first resize) sends ora's
  // line clearing into an endless loop: such a terminal gets the plain lines instead.
  const tty = Boolean(process.stderr.isTTY) && (process.stderr.columns ?? 0) > 0 && !opts.quiet;
  let completed = 0;
  let failed = 0;
  const active = new Set<string>();
  let spinner: Ora | null = null;
  let preparingStep: string | null = null;
  let announced = false;
  const label = () =>
    oneLine(preparingStep ?? `${completed}/${opts.total} ${[...active].map((a) => a.split('/').pop()).join(', ')}`);
  // ora (with its spinners and Unicode width tables, about 40 ms to load) loads only for a
  // terminal, and the first image does not wait for it (cold start, docs/internals.md): the spinner starts
  // with the state of the moment once it is loaded.
  const spinnerLoaded = tty
    ? import('ora').then(
        ({ default: ora }) => {
          spinner = ora({ stream: process.stderr, text: label() }).start();
        },
        () => undefined, // no spinner then: the summary line below still comes
      )
    : null;

  const line = (text: string) => {
    if (spinner) spinner.clear();
    process.stderr.write(oneLine(text) + '\n');
    if (spinner) spinner.render();
  };

  return {
    start(input) {
      active.add(input);
      if (spinner) spinner.text = label();
    },
    done(r, doneOpts = {}) {
      active.delete(r.input);
      completed++;
      if (opts.json) process.stdout.write(JSON.stringify(jsonLine(r)) + '\n');
      // Asked for with --review-below: said even with -q.
      if (r.review) line(`review: ${r.input} (confidence ${r.fields!.confidence!.toFixed(2)})`);
      if (r.error) {
        failed++;
        line(`cutout: ${r.input}: ${r.error.message}`);
      } else if (!opts.quiet && !tty && !doneOpts.silent) {
        line(r.skipped ? `skipped ${r.input} (output exists)` : `done ${r.input} -> ${r.output ?? 'stdout'} (${r.width}x${r.height}, ${r.ms} ms)`);
      }
      if (spinner) spinner.text = label();
    },
    preparation(event) {
      if (event.state === 'start' && !announced && !opts.quiet) {
        announced = true;
        line(`cutout: preparing model ${event.model} for its first use, from the installed package (nothing is downloaded); this is done once`);
      }
      preparingStep = event.state === 'start' ? `preparing model ${event.model}: ${event.step}` : null;
      if (spinner) spinner.text = label();
    },
    async finish(batchSummary, batchFailed) {
      await spinnerLoaded; // a spinner still loading is waited for, so the summary is its own
      const ok = completed - failed;
      const summary = batchSummary ?? (failed ? `${ok} done, ${failed} failed` : `${ok} done`);
      if (spinner) {
        if (batchFailed ?? failed) spinner.fail(summary);
        else spinner.succeed(summary);
      } else if (tty || batchSummary) {
        process.stderr.write(`${batchSummary ? 'cutout: ' : ''}${summary}\n`);
      }
    },
  };
}
