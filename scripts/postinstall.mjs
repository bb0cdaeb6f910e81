#!/usr/bin/env node
/**
 * npm's postinstall for an installed package (`npm install -g cutout`, `npx cutout`): assembles the
 * default model from @imgly/background-removal-data, verifies its sha256, converts it to fp32 and
 * builds the quality variants and the int8 copy (a graph rewrite from the shipped calibration
 * ranges, models/calibration), as `prepare` does for a clone. Nothing is downloaded.
 *
 * In a clone (src/ is present) it does nothing: `prepare` builds dist/ first and then prepares the
 * model, and npm runs postinstall before prepare. A failure here never fails the install: the first
 * `cutout` run prepares whatever is missing, and says so.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const inClone = fs.existsSync(path.join(root, 'src'));
const built = fs.existsSync(path.join(root, 'dist', 'cli.js'));
if (inClone || !built || process.env.CUTOUT_SKIP_MODEL_PREPARE === '1') process.exit(0);

const result = spawnSync(process.execPath, [path.join(root, 'bin', 'cutout'), 'models', 'pull'], { stdio: 'inherit' });
if (result.status !== 0) {
  process.stderr.write('cutout: the model could not be prepared during install; the first run will prepare it (cutout models pull does it now)\n');
}
