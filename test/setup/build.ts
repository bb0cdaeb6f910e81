/**
 * No test may pass against yesterday's dist/: the child-process tests run bin/cutout, which runs
 * dist/. Builds with the project's own `tsc` when any source file is newer than its compiled
 * file (or has none), or when tsconfig.json is newer than the oldest output.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function mtime(file: string): number | null {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return null;
  }
}

/** The first source file whose compiled file is missing or older, or null when dist/ is current. */
export function staleSource(): string | null {
  const src = path.join(ROOT, 'src');
  let oldestOutput = Number.POSITIVE_INFINITY;
  const walk = (dir: string): string | null => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        const found = walk(file);
        if (found) return found;
      } else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
        const out = path.join(ROOT, 'dist', path.relative(src, file)).replace(/\.tsx?$/, '.js');
        const built = mtime(out);
        if (built === null || built < mtime(file)!) return path.relative(ROOT, file);
        oldestOutput = Math.min(oldestOutput, built);
      }
    }
    return null;
  };
  const found = walk(src);
  if (found) return found;
  for (const config of ['tsconfig.json']) {
    if (mtime(path.join(ROOT, config))! > oldestOutput) return config;
  }
  return null;
}

/** Runs `tsc -p tsconfig.json` when dist/ is stale; says why on stderr. */
export function buildIfStale(): void {
  const stale = staleSource();
  if (!stale) return;
  process.stderr.write(`# dist/ is older than ${stale}: building (tsc) before the tests\n`);
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: ROOT, stdio: 'inherit' });
}
