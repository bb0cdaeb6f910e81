/**
 * Matching a path against a glob, for `--exclude` and for the files a watched glob picks up.
 * tinyglobby walks folders but exports no matcher, and Node's path.matchesGlob is experimental
 * before Node 22 (it prints a warning): this is the small part of glob syntax that paths need,
 * `*`, `**`, `?`, `[abc]` and `{a,b}`, with `/` as the separator on every platform.
 */

function escapeRegex(c: string): string {
  return /[\\^$.*+?()[\]{}|/]/.test(c) ? `\\${c}` : c;
}

/** The regular expression source of a glob (without anchors). */
function globSource(glob: string): string {
  let out = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*') {
      if (glob[i + 1] === '*') {
        // `**/` matches any number of folders (none included); a trailing `**` matches the rest.
        const slash = glob[i + 2] === '/';
        out += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else out += '[^/]*';
    } else if (c === '?') out += '[^/]';
    else if (c === '[') {
      const end = glob.indexOf(']', i + 1);
      if (end < 0) out += '\\[';
      else {
        const body = glob.slice(i + 1, end).replace(/\\/g, '\\\\');
        out += `[${body.startsWith('!') ? `^${body.slice(1)}` : body}]`;
        i = end;
      }
    } else if (c === '{') {
      braces++;
      out += '(?:';
    } else if (c === '}' && braces > 0) {
      braces--;
      out += ')';
    } else if (c === ',' && braces > 0) out += '|';
    else out += escapeRegex(c);
  }
  return out + ')'.repeat(braces);
}

/** `path` (any separator) as the matcher sees it: forward slashes, no leading `./`. */
export function globPath(p: string): string {
  return p.replace(/\\/g, '/').replace(/^(\.\/)+/, '');
}

/** Whether `file` matches `glob` as a whole path. */
export function matchesGlob(file: string, glob: string): boolean {
  return new RegExp(`^${globSource(globPath(glob))}$`).test(globPath(file));
}

/**
 * An `--exclude` matcher: a glob with a `/` is matched against the whole path (as found, relative
 * to the working folder, or absolute when it is); one without is matched against each name in
 * the path, as .gitignore does (`--exclude raw` leaves out a folder `raw` at any depth,
 * `--exclude '*.png'` every PNG).
 */
export function excludeMatcher(globs: readonly string[]): (file: string) => boolean {
  if (!globs.length) return () => false;
  const whole = globs.filter((g) => g.includes('/')).map((g) => new RegExp(`^${globSource(globPath(g))}$`));
  const names = globs.filter((g) => !g.includes('/')).map((g) => new RegExp(`^${globSource(g)}$`));
  return (file) => {
    const p = globPath(file);
    if (whole.some((re) => re.test(p))) return true;
    const parts = p.split('/');
    return names.some((re) => parts.some((part) => re.test(part)));
  };
}
