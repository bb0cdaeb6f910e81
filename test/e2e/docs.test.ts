/**
 * The documentation's checks (issue 28):
 *   1. every relative link and #anchor in README.md and docs/*.md resolves (the file exists; the
 *      anchor is a heading's GitHub slug, an explicit {#id}, or an <a id>/<a name>);
 *   2. every command and long flag that `cutout --help` and `cutout <command> --help` print (every
 *      command and subcommand) appears in README.md or docs/*.md;
 *   3. docs/api/ is what `npm run docs:api` (TypeDoc, typedoc.json, entry src/index.ts) makes now.
 * The library's examples are run by test/package.test.ts.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(ROOT, 'bin', 'cutout');

/** README.md and the guides of docs/ (not the generated reference, which is checked as a whole in 3). */
function docFiles(): string[] {
  const docs = fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort();
  return ['README.md', ...docs.map((f) => path.join('docs', f))];
}

/** The text outside fenced code blocks, line by line (a fence's lines become empty). */
function prose(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const m = /^\s*(```+|~~~+)/.exec(line);
    if (m) {
      if (fence === null) fence = m[1][0];
      else if (m[1][0] === fence) fence = null;
      return '';
    }
    return fence === null ? line : '';
  });
}

/** GitHub's heading slug: lowercase, markup dropped, punctuation dropped, spaces to '-'. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[*`]/g, '') // emphasis and code marks (underscores are kept, as GitHub keeps them)
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/ /g, '-');
}

/** Every anchor a Markdown file defines. */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of prose(text)) {
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    let heading = h[1];
    const explicit = /\s*\{#([^}\s]+)\}\s*$/.exec(heading);
    if (explicit) {
      anchors.add(explicit[1]);
      heading = heading.slice(0, explicit.index);
    }
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The link targets of a Markdown file, outside code (fenced or inline), with their line numbers. */
export function linksOf(text: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  prose(text).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, '``');
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ target: m[1], line: i + 1 });
    for (const m of line.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g)) links.push({ target: m[1], line: i + 1 });
    for (const m of line.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/g)) links.push({ target: m[1], line: i + 1 });
  });
  return links;
}

t.test('slugs follow GitHub', async (t) => {
  t.equal(slug('int8: the quantized model and `--precision`'), 'int8-the-quantized-model-and---precision');
  t.equal(slug('The HTTP API (`cutout serve`)'), 'the-http-api-cutout-serve');
  t.equal(slug('Metrics (`GET /metrics`)'), 'metrics-get-metrics');
  t.equal(slug("The protocol's overhead"), 'the-protocols-overhead');
  t.same([...anchorsOf('# A\n## Errors {#errors}\n## B\n## B\n<a id="x"></a>\n```\n# not a heading\n```\n')], [
    'a', 'errors', 'b', 'b-1', 'x',
  ]);
});

t.test('every relative link and #anchor of README.md and docs/*.md resolves', async (t) => {
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    let a = anchorCache.get(file);
    if (!a) anchorCache.set(file, (a = anchorsOf(fs.readFileSync(file, 'utf8'))));
    return a;
  };
  const broken: string[] = [];
  let checked = 0;
  for (const rel of docFiles()) {
    const file = path.join(ROOT, rel);
    for (const { target, line } of linksOf(fs.readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      checked++;
      const hash = target.indexOf('#');
      const filePart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
      const dest = filePart === '' ? file : path.resolve(path.dirname(file), filePart);
      const where = `${rel}:${line}: ${target}`;
      if (!dest.startsWith(ROOT)) broken.push(`${where} (outside the repository)`);
      else if (!fs.existsSync(dest)) broken.push(`${where} (no such file: ${path.relative(ROOT, dest)})`);
      else if (anchor !== null) {
        if (!dest.endsWith('.md')) broken.push(`${where} (an anchor into a file that is not Markdown)`);
        else if (!anchors(dest).has(anchor)) broken.push(`${where} (no anchor #${anchor} in ${path.relative(ROOT, dest)})`);
      }
    }
  }
  t.ok(checked > 50, `${checked} relative links checked`);
  t.same(broken, [], 'no broken link or anchor');
});

/** What `cutout ... --help` prints. */
function help(args: string[]): string {
  const r = spawnSync(process.execPath, [BIN, ...args, '--help'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  if (r.status !== 0) throw new Error(`cutout ${args.join(' ')} --help exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** The commands a help text lists (without commander's own `help`), and its long flags. */
export function parseHelp(text: string): { commands: string[]; flags: string[] } {
  const commands: string[] = [];
  const flags: string[] = [];
  let section = '';
  for (const line of text.split('\n')) {
    const head = /^(\w[\w ]*):\s*$/.exec(line);
    if (head) {
      section = head[1];
      continue;
    }
    const item = /^ {2}(\S.*?)(?: {2,}|$)/.exec(line);
    if (!item) continue;
    if (section === 'Commands') {
      const name = item[1].split(/[ |]/)[0];
      if (name !== 'help') commands.push(name);
    } else if (section === 'Options') {
      for (const m of item[1].matchAll(/--[a-z0-9][a-z0-9-]*/g)) flags.push(m[0]);
    }
  }
  return { commands, flags };
}

t.test('every command and long flag that --help prints is documented', async (t) => {
  const text = docFiles()
    .map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8'))
    .join('\n');
  const mentions = (phrase: string) =>
    new RegExp(`(?<![\\w-])${phrase.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/ /g, '\\s+')}(?![\\w-])`).test(text);
  const missing: string[] = [];
  const seen: string[] = [];
  const visit = (cmd: string[]) => {
    const { commands, flags } = parseHelp(help(cmd));
    const name = cmd.length ? `cutout ${cmd.join(' ')}` : 'cutout';
    for (const flag of flags) {
      seen.push(`${name} ${flag}`);
      if (!mentions(flag)) missing.push(`${name} ${flag}`);
    }
    for (const sub of commands) {
      const full = [...cmd, sub];
      seen.push(`cutout ${full.join(' ')}`);
      // A top-level command is written `cutout serve`; a subcommand at least `keys create`.
      if (!mentions(full.length === 1 ? `cutout ${sub}` : full.join(' '))) missing.push(`command: cutout ${full.join(' ')}`);
      visit(full);
    }
  };
  visit([]);
  t.ok(seen.filter((s) => s.startsWith('cutout keys ')).length > 3, `${seen.length} commands and flags found in --help`);
  t.same(missing, [], 'each is in README.md or docs/*.md (missing ones named)');
});

t.test('docs/api is current (else run npm run docs:api)', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-api-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const typedoc = path.join(ROOT, 'node_modules', 'typedoc', 'bin', 'typedoc');
  const r = spawnSync(process.execPath, [typedoc, '--options', path.join(ROOT, 'typedoc.json'), '--out', out, '--logLevel', 'Error'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 240_000,
  });
  t.equal(r.status, 0, `typedoc ran${r.stderr || r.stdout ? `: ${(r.stderr + r.stdout).trim()}` : ''}`);
  const list = (dir: string): string[] =>
    fs.readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.relative(dir, path.join(e.parentPath ?? (e as { path: string }).path, e.name)))
      .sort();
  const committed = path.join(ROOT, 'docs', 'api');
  const want = list(out);
  const have = fs.existsSync(committed) ? list(committed) : [];
  t.same(have, want, 'docs/api holds the files TypeDoc makes now (run npm run docs:api)');
  const differ = want.filter((f) => have.includes(f) && !fs.readFileSync(path.join(out, f)).equals(fs.readFileSync(path.join(committed, f))));
  t.same(differ, [], 'and each file is the same (run npm run docs:api)');
});
