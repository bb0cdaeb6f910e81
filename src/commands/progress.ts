/**
 * Progress for `cutout remove`: an ora spinner on a terminal, plain lines on stderr when piped,
 * JSON lines on stdout with --json. Failures are always named on stderr, one line each.
 */
import ora, { type Ora } from 'ora';
import { oneLine } from '../errors.js';
import type { PreparationEvent } from '../pipeline/weights.js';
import type { ItemReport } from './remove.js';

export interface Reporter {
  start(input: string): void;
  done(report: ItemReport): void;
  finish(): void;
  /** A model file being built on first use: one line once, and the step on the spinner. */
  preparation(event: PreparationEvent): void;
}

export function createReporter(opts: { total: number; json: boolean; quiet: boolean }): Reporter {
  // A terminal that reports 0 columns (`script`, `docker -t` before its first resize) sends ora's
  // line clearing into an endless loop: such a terminal gets the plain lines instead.
  const tty = Boolean(process.stderr.isTTY) && (process.stderr.columns ?? 0) > 0 && !opts.quiet;
  let completed = 0;
  let failed = 0;
  const active = new Set<string>();
  const spinner: Ora | null = tty ? ora({ stream: process.stderr, text: `0/${opts.total}` }).start() : null;
  let preparingStep: string | null = null;
  let announced = false;
  const label = () =>
    oneLine(preparingStep ?? `${completed}/${opts.total} ${[...active].map((a) => a.split('/').pop()).join(', ')}`);

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
    done(r) {
      active.delete(r.input);
      completed++;
      if (opts.json) process.stdout.write(JSON.stringify(r) + '\n');
      if (r.error) {
        failed++;
        line(`cutout: ${r.input}: ${r.error.message}`);
      } else if (!opts.quiet && !spinner) {
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
    finish() {
      if (!spinner) return;
      const ok = completed - failed;
      if (failed) spinner.fail(`${ok} done, ${failed} failed`);
      else spinner.succeed(`${ok} done`);
    },
  };
}
