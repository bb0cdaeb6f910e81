/**
 * CommonJS packages are loaded with require(), not import. Node 20's ESM loader takes a CommonJS
 * package through a slower path of its own, and a `cutout photo.jpg` pays for it before its first
 * image (cold start, docs/internals.md). Measured here, in fresh processes: sharp, with the semver it loads,
 * took 31-33 ms by require() and 55-78 ms by import(); commander, cosmiconfig and sqlite3 took
 * about 5 ms less each. Types still come from `import type`.
 */
import { createRequire } from 'node:module';

export const requireCjs = createRequire(import.meta.url);
