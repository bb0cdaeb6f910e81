/**
 * The CLI's edges, end to end through the real bin/cutout: every command takes --data and
 * --config, the config file is found from a subfolder, two inputs never share an output, exit
 * codes survive a reader that closes early, a failed write is never charged, --mask outputs are
 * not re-read, test keys give previews, --out is checked, and a 0-column terminal does not hang.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import sharp from 'sharp';
import { BIN, FIXTURES, ROOT, runCli } from '../helpers/cli.js';

function workdir(t: Tap.Test | any): { dir: string; env: Record<string, string> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-cli-edges-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, env: { CUTOUT_HOME: path.join(dir, 'home') } };
}

/** The item lines of --json (a batch's last `{"summary"}` object left out). */
const jsonLines = (out: Buffer) => out.toString().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((l) => !l.summary);

t.test('every command takes --data and --config (cli-contract)', async (t) => {
  const { dir, env } = workdir(t);
  const config = path.join(dir, 'cutout.json');
  fs.writeFileSync(config, '{}');
  const commands = [['models', 'list'], ['models', 'verify', 'isnet-small'], ['openapi'], ['completion', 'bash'], ['usage'], ['account'], ['keys', 'list']];
  for (const command of commands) {
    const r = await runCli([...command, '--data', path.join(dir, 'data'), '--config', config], { cwd: dir, env });
    t.equal(r.code, 0, `${command.join(' ')}: ${r.stderr}`);
  }
});

t.test('the config file is found from a subfolder of the project', async (t) => {
  const { dir } = workdir(t);
  fs.mkdirSync(path.join(dir, 'project', 'photos', 'raw'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'project', '.cutoutrc.json'), JSON.stringify({ dataDir: path.join(dir, 'from-config') }));
  const r = await runCli(['usage', '--json'], { cwd: path.join(dir, 'project', 'photos', 'raw'), env: { CUTOUT_HOME: '', HOME: dir } });
  t.equal(r.code, 0, r.stderr);
  t.ok(fs.existsSync(path.join(dir, 'from-config', 'cutout.db')), 'the data directory came from ../../.cutoutrc.json');
});

t.test('two inputs with one output name: the second is refused, the first is written', async (t) => {
  const { dir, env } = workdir(t);
  fs.mkdirSync(path.join(dir, 'in'));
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(dir, 'in', 'a.jpg'));
  await sharp(path.join(FIXTURES, 'chelsea.jpg')).png().toFile(path.join(dir, 'in', 'a.png'));
  const r = await runCli(['in', '--out', 'out', '--size', 'preview', '--quality', 'fast', '--json', '--no-progress'], { cwd: dir, env });
  t.equal(r.code, 1, 'a refused input is a failure');
  const [first, second] = jsonLines(r.stdout).sort((a, b) => a.input.localeCompare(b.input));
  t.match(first, { input: 'in/a.jpg', output: 'out/a.cutout.png', error: null });
  t.match(second, { input: 'in/a.png', output: null, error: { code: 'invalid_request', message: /out\/a\.cutout\.png is also the output of in\/a\.jpg/ } });
  t.match(r.stderr, /in\/a\.png: Output out\/a\.cutout\.png is also the output of in\/a\.jpg/);
  t.equal((await sharp(path.join(dir, 'out', 'a.cutout.png')).metadata()).width, 600, 'the file is the first input\'s (coffee, 600 px)');
});

t.test('a reader that closes stdout early still sees exit code 1 for failed inputs', async (t) => {
  const { dir, env } = workdir(t);
  fs.writeFileSync(path.join(dir, 'text.jpg'), 'not an image');
  fs.writeFileSync(path.join(dir, 'empty.png'), '');
  const child = spawn(process.execPath, [BIN, 'text.jpg', 'empty.png', 'missing.jpg', '--json'], { cwd: dir, env: { ...process.env, ...env } });
  child.stderr.resume();
  // Like `| head -1`: read the first line, then close the pipe.
  const firstLine = await new Promise<string>((resolve) => {
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      if (buf.includes('\n')) {
        child.stdout.destroy();
        resolve(buf.split('\n')[0]);
      }
    });
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.match(JSON.parse(firstLine), { error: { code: /./ } });
  t.equal(code, 1);
});

t.test('an output that cannot be written is not charged', async (t) => {
  const { dir, env } = workdir(t);
  const { key } = JSON.parse((await runCli(['keys', 'create', '--json'], { cwd: dir, env })).stdout.toString());
  fs.writeFileSync(path.join(dir, 'afile'), 'a file where a directory is needed');
  const r = await runCli([path.join(FIXTURES, 'chelsea.jpg'), '--key', key, '--out', 'afile/x.png', '--json'], { cwd: dir, env });
  t.equal(r.code, 1);
  t.match(jsonLines(r.stdout)[0], { output: null, error: { code: 'processing_failed', message: /Cannot write afile\/x\.png/ } });
  const account = JSON.parse((await runCli(['account', '--key', key, '--json'], { cwd: dir, env })).stdout.toString());
  t.match(account, { balance: 10, credits_used_this_month: 0 }, 'nothing charged');
  t.same(fs.readdirSync(dir).sort(), ['afile', 'home'], 'no temporary file left behind');
});

t.test('--mask outputs are not inputs of the next run on the folder', async (t) => {
  const { dir, env } = workdir(t);
  fs.mkdirSync(path.join(dir, 'm'));
  fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, 'm', 'chelsea.jpg'));
  const args = ['m', '--mask', '--size', 'preview', '--quality', 'fast', '--format', 'jpg', '--json'];
  t.equal((await runCli(args, { cwd: dir, env })).code, 0);
  const again = await runCli([...args, '--skip-existing'], { cwd: dir, env });
  t.equal(again.code, 0, again.stderr);
  t.match(jsonLines(again.stdout), [{ input: 'm/chelsea.jpg', skipped: true }]);
  t.same(fs.readdirSync(path.join(dir, 'm')).sort(), ['chelsea.jpg', 'chelsea.mask.jpg']);
});

t.test('a test key gets preview-size results, as on the server, and is not charged', async (t) => {
  const { dir, env } = workdir(t);
  const { key } = JSON.parse((await runCli(['keys', 'create', '--test', '--json'], { cwd: dir, env })).stdout.toString());
  const big = path.join(dir, 'big.jpg');
  await sharp(path.join(FIXTURES, 'coffee.jpg')).resize(1200).toFile(big);
  const r = await runCli([big, '--key', key, '--quality', 'fast', '--json'], { cwd: dir, env });
  t.equal(r.code, 0, r.stderr);
  t.match(jsonLines(r.stdout)[0], { width: 800, height: 533, credits_charged: 0 });
});

t.test('--out is checked before any work', async (t) => {
  const { dir, env } = workdir(t);
  const bmp = await runCli([path.join(FIXTURES, 'coffee.jpg'), '--out', 'r.bmp'], { cwd: dir, env });
  t.equal(bmp.code, 2);
  t.match(bmp.stderr, /--out r\.bmp: cutout writes png, webp, jpg or gif, not bmp/);
  const two = await runCli([path.join(FIXTURES, 'coffee.jpg'), path.join(FIXTURES, 'chelsea.jpg'), '--out', 'x.png'], { cwd: dir, env });
  t.equal(two.code, 2);
  t.match(two.stderr, /--out x\.png names one file, but 2 inputs were given/);
  t.same(fs.readdirSync(dir), [], 'nothing written, not even a data directory');
});

t.test('a long but valid output name is written (the temporary name stays short)', async (t) => {
  const { dir, env } = workdir(t);
  const name = 'M'.repeat(240); // the output, M...M.cutout.png, is 251 bytes: within the 255 limit
  fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, `${name}.jpg`));
  const r = await runCli([`${name}.jpg`, '--size', 'preview', '--quality', 'fast', '--no-progress'], { cwd: dir, env });
  t.equal(r.code, 0, r.stderr);
  t.ok(fs.existsSync(path.join(dir, `${name}.cutout.png`)));
});

t.test('--out naming the input itself is refused, even with --overwrite', async (t) => {
  const { dir, env } = workdir(t);
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(dir, 'self.png'));
  const before = fs.readFileSync(path.join(dir, 'self.png'));
  const r = await runCli(['self.png', '--out', 'self.png', '--overwrite', '--json'], { cwd: dir, env });
  t.equal(r.code, 1);
  t.match(jsonLines(r.stdout)[0], { error: { code: 'invalid_request', message: 'Output self.png is the input itself; --overwrite replaces outputs, never the photo' } });
  t.ok(fs.readFileSync(path.join(dir, 'self.png')).equals(before), 'the photo is untouched');
});

t.test('SIGTERM stops a run cleanly: the images in flight finish, no temporary file is left, exit 130', async (t) => {
  const { dir, env } = workdir(t);
  fs.mkdirSync(path.join(dir, 'in'));
  for (let i = 0; i < 6; i++) fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, 'in', `c${i}.jpg`));
  const child = spawn(process.execPath, [BIN, 'in', '--out', 'out', '--quality', 'fast', '--no-progress'], { cwd: dir, env: { ...process.env, ...env } });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  // Stop it once the first output is in place, while the others are being made or written.
  while (!fs.existsSync(path.join(dir, 'out', 'c0.cutout.png')) && !fs.existsSync(path.join(dir, 'out', 'c1.cutout.png'))) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill('SIGTERM');
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  t.equal(code, 130, 'exit 130: interrupted (cli-contract)');
  t.match(stderr, /cutout: interrupted \(SIGTERM\): \d+ done, \d+ left; run it again with --skip-existing/, 'one line says what is done and left');
  t.notMatch(stderr, /abort|terminate called/, 'no native abort on the way out');
  t.same(fs.readdirSync(path.join(dir, 'out')).filter((f) => f.endsWith('.tmp')), [], 'no temporary file left');
});

t.test('errors are one line: commander\'s, a bad config file\'s, and a file name with control characters', async (t) => {
  const { dir, env } = workdir(t);
  const unknown = await runCli(['-x.jpg'], { cwd: dir, env });
  t.equal(unknown.code, 2);
  t.equal(unknown.stderr, "cutout: unknown option '-x.jpg' (try cutout --help)\n");
  fs.writeFileSync(path.join(dir, 'bad.json'), '{"quality": ');
  const config = await runCli(['x.jpg', '--config', 'bad.json'], { cwd: dir, env });
  t.equal(config.code, 2);
  t.match(config.stderr, /^cutout: Cannot read config file bad\.json: Unexpected end of JSON input[^\n]*\n$/);
  fs.writeFileSync(path.join(dir, 'a\nb\x1b[31m.jpg'), 'not an image');
  const odd = await runCli(['a\nb\x1b[31m.jpg', '--no-progress'], { cwd: dir, env });
  t.equal(odd.code, 1);
  t.equal(odd.stderr, 'cutout: a\\nb\\x1b[31m.jpg: Not a JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC image\n');
});

const hasScript = spawnSync('script', ['--version']).status === 0;
const NO_SCRIPT = !hasScript && 'script(1) is not installed (Debian: apt-get install bsdutils)';

/**
 * Runs a shell command in a pty made by script(1) (0 x 0 with a non-terminal stdin, unless the
 * command sets a size with stty); resolves with its exit code (null if killed after `timeoutMs`)
 * and everything it wrote to the terminal.
 */
async function inPty(command: string, opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ code: number | null; out: string }> {
  const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  return { code, out };
}

t.test('a terminal of 0 columns gets plain lines, not a spinner that never ends', { skip: NO_SCRIPT }, async (t) => {
  const { dir, env } = workdir(t);
  const { code, out } = await inPty(`"${process.execPath}" "${BIN}" missing.jpg`, { cwd: dir, env: { ...process.env, ...env }, timeoutMs: 30_000 });
  t.equal(code, 1, 'exits with 1 (not killed after 30 s)');
  t.match(out, /cutout: missing\.jpg: No such file/);
});

t.test('a terminal gets ora\'s spinner, loaded without holding up the first image, and its summary line', { skip: NO_SCRIPT }, async (t) => {
  const { dir, env } = workdir(t);
  fs.copyFileSync(path.join(FIXTURES, 'astronaut.jpg'), path.join(dir, 'photo.jpg'));
  // A pty of 80 columns, and no CI in the environment: ora animates nothing where CI is set
  // (is-interactive), as on a CI runner.
  const { CI: _ci, ...outsideCi } = process.env;
  const { code, out } = await inPty(`stty cols 80 rows 24; "${process.execPath}" "${BIN}" photo.jpg missing.jpg`, { cwd: dir, env: { ...outsideCi, ...env }, timeoutMs: 60_000 });
  t.equal(code, 1, 'one input failed');
  t.match(out, /\u001b\[\?25l/, 'the spinner hid the cursor');
  t.match(out, /\d\/2 /, 'the spinner shows the count');
  t.match(out, /cutout: missing\.jpg: No such file/);
  t.match(out, /1 done, 0 skipped, 1 failed in [\d.]+ s/, 'the summary line (a batch of two)');
  t.ok(fs.existsSync(path.join(dir, 'photo.cutout.png')), 'the cutout was written');
});
