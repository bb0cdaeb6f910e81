/**
 * Error reasons (issue 46): every reason a CutoutError is thrown with is listed in ERROR_REASONS
 * under the code it is thrown with (and, since issue 53, the compiler holds it: `reason` is
 * ErrorReason, a key of the table), and remove.bg's dialect renders its own codes from the reason,
 * whatever the message says.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CutoutError, ERROR_REASONS } from '../src/errors.js';
import { removeBgError } from '../src/server/dialects/removebg-errors.js';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
}

t.test('every reason thrown is in the table, with the code it is thrown with', async (t) => {
  const seen = new Set<string>();
  for (const file of sources(SRC)) {
    const text = fs.readFileSync(file, 'utf8');
    // new CutoutError('<code>', ..., { ..., reason: '<reason>' }), within the same call
    for (const m of text.matchAll(/new CutoutError\(\s*'([a-z_]+)'(?:(?!new CutoutError|super\()[\s\S]){0,400}?reason: '([a-z_]+)'/g)) {
      const [, code, reason] = m;
      seen.add(reason);
      t.ok(reason in ERROR_REASONS, `${path.relative(SRC, file)}: ${reason} is listed`);
      if (reason in ERROR_REASONS) t.equal(ERROR_REASONS[reason as keyof typeof ERROR_REASONS].code, code, `${reason} is a case of ${code}`);
    }
    // classes that pass a reason to super('<code>', ...)
    for (const m of text.matchAll(/super\(\s*'([a-z_]+)'(?:(?!new CutoutError|super\()[\s\S]){0,400}?reason: '([a-z_]+)'/g)) {
      seen.add(m[2]);
      t.equal(ERROR_REASONS[m[2] as keyof typeof ERROR_REASONS]?.code, m[1], `${path.relative(SRC, file)}: ${m[2]} is a listed case of ${m[1]}`);
    }
  }
  // An option's reason is OptionError's third argument, sometimes through a variable (remove.bg's
  // URL checks, the background's decode): its literal appears where it is chosen.
  const elsewhere = sources(SRC).filter((f) => !f.endsWith(`${path.sep}errors.ts`)).map((f) => fs.readFileSync(f, 'utf8')).join('\n');
  for (const reason of Object.keys(ERROR_REASONS)) t.ok(seen.has(reason) || elsewhere.includes(`'${reason}'`), `${reason} is thrown somewhere`);
});

t.test('remove.bg\'s codes come from the reason, not the message', async (t) => {
  const tooBig = new CutoutError('image_too_large', 'whatever the words', { reason: 'resolution_too_high' });
  t.match(removeBgError(tooBig), { status: 400, code: 'resolution_too_high' });
  t.match(removeBgError(new CutoutError('image_too_large', 'Image is over 50 megapixels')), { code: 'file_too_large' }, 'a message alone decides nothing');
  t.match(removeBgError(new CutoutError('unsupported_format', 'x', { reason: 'not_an_image' })), { code: 'invalid_file_type' });
  t.match(removeBgError(new CutoutError('invalid_api_key', 'x', { reason: 'missing_key' })), { title: 'Missing API Key' });
});
