/**
 * The error of a bad option value, apart from the option table (options.ts) so that the parsers
 * the table uses (layout-options.ts) can throw it without importing the table back.
 */
import { CutoutError, type ErrorReason } from './errors.js';

/** Where a value came from, for messages: a CLI flag (`--bg-color`) or an API parameter (`bg_color`). */
export type OptionSource = 'cli' | 'api';

export class OptionError extends CutoutError {
  /** Parameter name as the user wrote it. */
  declare readonly param: string;
  /**
   * Its `reason` (CutoutError's) is a finer one than `invalid_request` where one exists
   * (`roi_exceeds_bounds`, `roi_region_empty`, `failed_bg_download`, ...): the remove.bg dialect
   * answers it as its code.
   */
  constructor(param: string, message: string, reason?: ErrorReason) {
    super('invalid_request', message, { param, reason });
  }
}
