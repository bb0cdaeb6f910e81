/**
 * `--manifest FILE`: the JSON-lines record of a batch, one line per input handled (cli-contract,
 * "The batch processor"). The last line for an input decides whether a rerun skips it: done (no
 * error), the same sha256 of its bytes, the same options, the same output, and that output still
 * there. Paths are written relative to the manifest's folder, so a CI cache that restores the
 * manifest with the outputs under another checkout path still matches.
 *
 * A line is appended (one write of one line, in append mode) the moment its output is renamed
 * into place (remove-item.ts, onOutputInPlace): a line never names an output that is not
 * complete, and the gap in which a kill could leave an output without its line is one event-loop
 * turn (not the ledger's commit). A line cut short by a kill is ignored when read.
 *
 * That turn is closed by a second file beside it, `FILE.inflight`: the output's path is appended
 * there just before its rename. A kill between the rename and the line leaves an output that the
 * manifest does not record but the in-flight list names, so the rerun redoes that input and may
 * replace the output (without --overwrite) instead of refusing it. A path leaves the list once a
 * done line names its output; the list is removed when a run ends with none left.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fsReason } from '../errors.js';
import { OPTION_TABLE, type OptionRow, type RecordedRequest } from '../options.js';
import { manifestFields } from '../result-fields.js';
import type { ItemReport } from './remove-item.js';
import { UsageError } from './usage-error.js';

/** The options that change an output (not concurrency, threads, or where the output goes). */
export type OutputOptions = Record<string, string | boolean | null>;

export interface ManifestLine {
  input: string;
  sha256: string | null;
  output: string | null;
  options: OutputOptions;
  ms: number;
  credits_charged: number;
  error: { code: string; message: string } | null;
  at: string;
  /** The output was there before the manifest, and this run took it as done (batch.ts, adoption). */
  adopted?: true;
  /** A done line's result fields, under RESULT_FIELDS' manifest keys (`width`, `confidence`, `processing_ms`, ...). */
  [field: string]: unknown;
}

/**
 * The options of `request` that change its output, as a manifest line records them: the model,
 * and each row of the options table with `changesOutput` (its `record` says how). Read off the
 * table, so that an option added there is compared on reruns without a change here.
 */
export function outputOptions(model: string, request: RecordedRequest, table: readonly OptionRow[] = OPTION_TABLE): OutputOptions {
  const options: OutputOptions = { model };
  for (const row of table) {
    if (!row.changesOutput) continue;
    const name = row.record?.name ?? row.api ?? row.key;
    const value = request[row.key as keyof RecordedRequest];
    if (value === undefined || value === null) {
      if (row.record && 'absent' in row.record) options[name] = row.record.absent ?? null;
      continue;
    }
    options[name] = row.record?.text ? row.record.text(value as never, request) : plainValue(value);
  }
  return options;
}

function plainValue(value: unknown): string | boolean {
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  return typeof value === 'number' ? String(value) : JSON.stringify(value);
}

/** Keys sorted, so that a line written by another version in another key order still compares equal. */
function canonical(options: OutputOptions): string {
  return JSON.stringify(Object.keys(options).sort().map((k) => [k, options[k]]));
}

export class Manifest {
  /** The last line for each input, by absolute path. */
  private readonly last = new Map<string, ManifestLine>();
  /** Outputs (absolute) that a done line recorded: a redo may replace them without --overwrite. */
  private readonly recorded = new Set<string>();
  /** Outputs (absolute) about to be renamed into place whose done line is not written yet. */
  private readonly inFlight = new Set<string>();
  private fd: number | null = null;
  private inFlightFd: number | null = null;
  /** The file ends in a line cut short (a kill): the next line starts on a line of its own. */
  private torn = false;
  private readonly dir: string;

  constructor(readonly file: string) {
    this.dir = path.dirname(path.resolve(file));
  }

  /** The in-flight list beside the manifest (see the header). */
  get inFlightFile(): string {
    return `${this.file}.inflight`;
  }

  /** Reads FILE if it exists (a missing one is an empty manifest). */
  static load(file: string): Manifest {
    const manifest = new Manifest(file);
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return manifest;
      throw new UsageError(`--manifest ${file}: cannot read it: ${fsReason(err)}`);
    }
    manifest.torn = text.length > 0 && !text.endsWith('\n');
    for (const raw of text.split('\n')) {
      if (!raw.trim()) continue;
      let line: ManifestLine;
      try {
        line = JSON.parse(raw) as ManifestLine;
      } catch {
        continue; // a line cut short by a kill: that input is simply not recorded
      }
      if (typeof line?.input !== 'string') continue;
      manifest.remember(line);
    }
    manifest.loadInFlight();
    return manifest;
  }

  /** Reads the in-flight list: one JSON string (an output's path) per line; a line cut short is ignored. */
  private loadInFlight(): void {
    let text = '';
    try {
      text = fs.readFileSync(this.inFlightFile, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new UsageError(`--manifest ${this.file}: cannot read ${this.inFlightFile}: ${fsReason(err)}`);
    }
    for (const raw of text.split('\n')) {
      try {
        const output: unknown = JSON.parse(raw);
        // One a done line records needs no entry: records() says yes to it already.
        if (typeof output === 'string' && !this.recorded.has(this.abs(output))) this.inFlight.add(this.abs(output));
      } catch {
        // an empty line, or one cut short by a kill before its rename: that output was not touched
      }
    }
  }

  private abs(p: string): string {
    return path.resolve(this.dir, p);
  }

  private rel(p: string): string {
    return path.relative(this.dir, path.resolve(p)).split(path.sep).join('/') || '.';
  }

  private remember(line: ManifestLine): void {
    this.last.set(this.abs(line.input), line);
    if (!line.error && line.output) {
      this.recorded.add(this.abs(line.output));
      this.inFlight.delete(this.abs(line.output));
    }
  }

  get size(): number {
    return this.last.size;
  }

  /**
   * Whether the last line for `input` could let it be skipped, before its bytes are hashed: done,
   * the same options, the same output, and that output present. Then `unchanged` decides on the hash.
   */
  candidate(input: string, output: string | null, options: OutputOptions): ManifestLine | null {
    const line = this.last.get(path.resolve(input));
    if (!line || line.error || !line.output || !line.sha256 || output === null) return null;
    if (this.abs(line.output) !== path.resolve(output) || canonical(line.options ?? {}) !== canonical(options)) return null;
    return fs.existsSync(output) ? line : null;
  }

  /** Whether `output` is one the manifest recorded or was putting in place (a redo may replace it). */
  records(output: string | null): boolean {
    return output !== null && (this.recorded.has(path.resolve(output)) || this.inFlight.has(path.resolve(output)));
  }

  /** Notes `output` in the in-flight list just before it is renamed into place (see the header). */
  placing(output: string): void {
    const abs = path.resolve(output);
    if (this.inFlight.has(abs)) return; // already listed, by this run or by one that was killed
    try {
      if (this.inFlightFd === null) {
        fs.mkdirSync(this.dir, { recursive: true });
        this.inFlightFd = fs.openSync(this.inFlightFile, 'a');
      }
      // A line of its own even after one cut short: a leading newline costs nothing when read.
      fs.writeSync(this.inFlightFd, `\n${JSON.stringify(this.rel(abs))}\n`);
    } catch (err) {
      throw new Error(`--manifest ${this.file}: cannot write ${this.inFlightFile}: ${fsReason(err)}`);
    }
    this.inFlight.add(abs);
  }

  /** The last line for `input` (done or failed), if any. */
  lineOf(input: string): ManifestLine | undefined {
    return this.last.get(path.resolve(input));
  }

  /** Whether any line names `input` (done or failed). */
  hasLine(input: string): boolean {
    return this.last.has(path.resolve(input));
  }

  /** Appends the line of a handled input (after its output is in place); `adopted`: see ManifestLine. */
  append(report: ItemReport, sha256: string | null, options: OutputOptions, adopted = false): void {
    const line: ManifestLine = {
      input: this.rel(report.input),
      sha256,
      output: report.output === null ? null : this.rel(report.output),
      options,
      ms: report.ms,
      credits_charged: report.credits_charged ?? 0,
      error: report.error,
      at: new Date().toISOString(),
      ...(adopted ? { adopted: true as const } : {}),
      ...manifestFields(report.error ? null : report.fields),
    };
    try {
      if (this.fd === null) {
        fs.mkdirSync(this.dir, { recursive: true });
        this.fd = fs.openSync(this.file, 'a');
      }
      // One write per line: a line is whole, or cut short only by a kill in the middle of it.
      fs.writeSync(this.fd, (this.torn ? '\n' : '') + JSON.stringify(line) + '\n');
      this.torn = false;
    } catch (err) {
      throw new Error(`--manifest ${this.file}: cannot write it: ${fsReason(err)}`);
    }
    this.remember(line);
  }

  /**
   * At the end of a run the in-flight list is removed when none of its outputs is left without a
   * done line (an output that does not exist needs no entry). Otherwise it stays as it is: entries
   * that a done line records are dropped when it is read again.
   */
  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
    if (this.inFlightFd !== null) fs.closeSync(this.inFlightFd);
    this.inFlightFd = null;
    if ([...this.inFlight].some((abs) => fs.existsSync(abs))) return;
    try {
      fs.rmSync(this.inFlightFile, { force: true });
    } catch {
      // Left behind: it only lets a rerun replace outputs this tool was writing.
    }
  }
}
