/**
 * What a new user tripped over in the first hour (issue 29), through the real bin/cutout: the help
 * says the API's and the CLI's size defaults and `cutout --help` shows the main command's flags;
 * every --json line carries credits_charged; serve stops when the process that started it dies
 * (npx leaves node orphaned); an unreachable upstream at start is said in start-up words.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { BIN, FIXTURES, ROOT, runCli } from '../helpers/cli.js';
import { freePort, until } from '../helpers/process.js';
import { buildProgram } from '../../src/program.js';

function workdir(t: Tap.Test): { dir: string; env: Record<string, string> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-first-hour-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, env: { CUTOUT_HOME: path.join(dir, 'home'), CUTOUT_MARKETPLACE_SECRET: '' } };
}

const jsonLines = (out: Buffer) => out.toString().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

t.test('cutout --help shows the main command\'s flags, from the remove command itself', async (t) => {
  const r = await runCli(['--help']);
  t.equal(r.code, 0, r.stderr);
  const help = r.stdout.toString();
  const remove = buildProgram().commands.find((c) => c.name() === 'remove')!;
  t.ok(remove.options.length > 20, 'the remove command was read');
  for (const option of remove.options) t.ok(help.includes(option.long!), `cutout --help names ${option.long}`);
  t.match(help, /Usage: cutout remove \[options\] \[inputs\.\.\.\]/);
  t.match(help, /Commands:[\s\S]*serve/, 'and the commands are still listed');
});

t.test('the help of remove and serve says the size defaults of the CLI and of the API', async (t) => {
  const remove = (await runCli(['remove', '--help'])).stdout.toString();
  t.match(remove, /defaults to --size full/);
  t.match(remove, /size=preview \(longest side at most 800 px/);
  const serve = (await runCli(['serve', '--help'])).stdout.toString();
  t.match(serve, /answer size=preview \(longest side at most\s+800 px, free\) when size is not given/);
  t.match(serve, /X-Cutout-Size/);
  t.match(serve, /--no-exit-with-parent/);
});

t.test('--json: every line carries credits_charged, 0 for local runs, failures and skips', async (t) => {
  const { dir, env } = workdir(t);
  fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, 'chelsea.jpg'));
  const args = ['chelsea.jpg', 'missing.jpg', '--size', 'preview', '--quality', 'fast', '--json', '--no-progress'];
  const first = await runCli(args, { cwd: dir, env });
  t.equal(first.code, 1, 'the missing input fails');
  const lines = jsonLines(first.stdout).filter((l) => !l.summary); // a batch's last line is its summary
  t.equal(lines.length, 2);
  for (const line of lines) t.equal(line.credits_charged, 0, `${line.input}: credits_charged 0`);
  t.match(lines.find((l) => l.input === 'chelsea.jpg'), { error: null, width: 451 });
  const again = await runCli([...args, '--skip-existing'], { cwd: dir, env });
  const skipped = jsonLines(again.stdout).find((l) => l.input === 'chelsea.jpg');
  t.match(skipped, { skipped: true, credits_charged: 0 });
});

t.test('serve --upstream at a closed port: exit 1, one line in start-up words', async (t) => {
  const { dir, env } = workdir(t);
  const port = await freePort();
  const r = await runCli(['serve', '--port', '0', '--data', dir, '--upstream', `http://127.0.0.1:${port}`], { env });
  t.equal(r.code, 1, r.stderr);
  t.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`);
  t.equal(r.stderr.trim(), `cutout serve: cannot reach the inference server at http://127.0.0.1:${port}: connection refused`);
  t.notMatch(r.stderr, /charged|Retry/, 'no request words');
  t.equal(r.stdout.toString(), '', 'no listening line');
});

/** Whether process `pid` still runs (a zombie, awaiting its new parent's wait, counts as ended). */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * A shell that starts serve in the background, as npx's sh does, and waits: resolves with serve's
 * pid and URL once it listens. Serve is killed in teardown if it is still there.
 */
async function serveUnderShell(t: Tap.Test, extra: string[] = []) {
  const { dir, env } = workdir(t);
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, BIN, 'serve', '--port', '0', '--data', dir, ...extra].map(quote).join(' ');
  const shell = spawn('sh', ['-c', `${command} & echo "pid $!"; wait`], { cwd: ROOT, env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  shell.stdout.on('data', (d: Buffer) => (out += d.toString()));
  shell.stderr.on('data', (d: Buffer) => (err += d.toString()));
  // serve holds the shell's stdout and stderr: they close when serve has ended, not when the shell has.
  const pipesClosed = new Promise<void>((resolve) => shell.stdout.once('close', () => resolve()));
  const { pid, url } = await until('serve listening under the shell', async () => {
    const pid = /^pid (\d+)$/m.exec(out);
    const url = /^listening on (\S+)$/m.exec(out);
    return pid && url ? { pid: Number(pid[1]), url: url[1] } : null;
  }, 30_000);
  t.teardown(() => {
    if (running(pid)) process.kill(pid, 'SIGKILL');
  });
  return { shell, pid, url, pipesClosed, stderr: () => err };
}

t.test('serve stops cleanly, as on SIGTERM, when the shell that started it is killed', async (t) => {
  const { shell, pid, url, pipesClosed, stderr } = await serveUnderShell(t);
  t.equal((await fetch(`${url}/api/v1/health`)).status, 200);
  const killed = Date.now();
  shell.kill('SIGKILL'); // the shell cannot pass anything on: serve is orphaned
  await Promise.race([pipesClosed, new Promise((_, reject) => setTimeout(() => reject(new Error(`serve still running; stderr: ${stderr()}`)), 15_000))]);
  t.ok(Date.now() - killed < 15_000, `serve ended ${Date.now() - killed} ms after its parent`);
  await until('serve gone', async () => !running(pid), 5_000);
  t.match(stderr(), /cutout serve: parent process gone, finishing requests and running jobs in flight/, 'the clean stop of SIGTERM');
  t.notMatch(stderr(), /Error|at .*\.js:\d+/, 'no crash');
});

t.test('serve --no-exit-with-parent keeps serving when its shell is killed', async (t) => {
  const { shell, pid, url } = await serveUnderShell(t, ['--no-exit-with-parent']);
  shell.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 3000)); // the watch polls every second
  t.ok(running(pid), 'still running');
  t.equal((await fetch(`${url}/api/v1/health`)).status, 200, 'and serving');
  process.kill(pid, 'SIGTERM');
  await until('serve gone after SIGTERM', async () => !running(pid), 15_000);
});
