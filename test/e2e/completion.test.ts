import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { registerCompletion, SHELLS } from '../../src/commands/completion.js';
import { IMAGE_FORMATS as FORMATS, QUALITIES, SIZES } from '../../src/options.js';
import { buildProgram } from '../../src/program.js';

const scriptPath = (shell: string) => fileURLToPath(new URL(`../../completions/cutout.${shell}`, import.meta.url));

/** A fresh program with the completion command, its output captured and exits turned into throws. */
function program() {
  const out: string[] = [];
  const err: string[] = [];
  const p = new Command('cutout')
    .exitOverride()
    .configureOutput({ writeOut: (s) => out.push(s), writeErr: (s) => err.push(s) });
  registerCompletion(p);
  return { p, out, err };
}

t.test('each shell prints its script', async (t) => {
  for (const shell of SHELLS) {
    const { p, out, err } = program();
    await p.parseAsync(['completion', shell], { from: 'user' });
    t.equal(out.join(''), readFileSync(scriptPath(shell), 'utf8'), `${shell}: the file of completions/`);
    t.match(out.join(''), /cutout/);
    t.same(err, [], `${shell}: nothing on stderr`);
  }
});

t.test('an unknown shell is a usage error (exit code 2) naming the supported shells', async (t) => {
  const { p, out, err } = program();
  const e = await p.parseAsync(['completion', 'powershell'], { from: 'user' }).then(
    () => null,
    (e: unknown) => e,
  );
  t.type(e, CommanderError);
  t.equal((e as CommanderError).exitCode, 2);
  t.match(err.join(''), /unknown shell "powershell".*bash, zsh, fish/);
  t.same(out, []);
});

t.test('the bash script is valid bash', async (t) => {
  t.doesNotThrow(() => execFileSync('bash', ['-n', scriptPath('bash')], { stdio: 'pipe' }));
});

t.test('zsh and fish scripts parse, where those shells are installed', async (t) => {
  for (const shell of ['zsh', 'fish']) {
    const r = spawnSync(shell, ['-n', scriptPath(shell)], { encoding: 'utf8' });
    if ((r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
      t.comment(`${shell} not installed, syntax not checked`);
      continue;
    }
    t.equal(r.status, 0, `${shell} -n: ${r.stderr}`);
  }
});

t.test('bash completes commands, subcommands, flags and fixed values', async (t) => {
  // Drives _cutout as bash would: COMP_WORDS and COMP_CWORD set, COMPREPLY read back.
  const complete = (line: string): string[] => {
    const words = line.split(' ');
    const driver = [
      `source ${JSON.stringify(scriptPath('bash'))}`,
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')})`,
      `COMP_CWORD=${words.length - 1}`,
      '_cutout',
      'printf "%s\\n" "${COMPREPLY[@]}"',
    ].join('\n');
    const out = execFileSync('bash', ['-c', driver], { encoding: 'utf8', cwd: fileURLToPath(new URL('../../completions/', import.meta.url)) });
    return out.split('\n').filter(Boolean).sort();
  };
  t.same(complete('cutout se'), ['serve']);
  t.same(complete('cutout photo.jpg --size '), [...SIZES].sort());
  t.same(complete('cutout --format '), [...FORMATS].sort());
  t.same(complete('cutout --size = '), [...SIZES].sort(), '--size= when = breaks words');
  t.same(complete('cutout remove --quality '), ['balanced', 'best', 'fast', 'max']);
  t.same(complete('cutout keys '), ['create', 'list', 'revoke']);
  t.same(complete('cutout --data /tmp keys '), ['create', 'list', 'revoke'], 'option values are not commands');
  t.same(complete('cutout models '), ['export', 'list', 'pull', 'verify']);
  t.ok(complete('cutout models export --').includes('--triton'));
  t.ok(complete('cutout serve --').includes('--upstream-model'));
  t.same(complete('cutout model-server --p'), ['--port', '--precision']);
  t.same(complete('cutout serve --upstream http://x:8000 --w'), ['--workers'], 'the URL is a value, not a command');
  t.ok(complete('cutout models pull --').includes('--no-variants'));
  t.ok(complete('cutout models list --').includes('--json'));
  t.same(complete('cutout credits '), ['add']);
  t.same(complete('cutout completion '), ['bash', 'fish', 'zsh']);
  t.same(complete('cutout --config cutout.b'), ['cutout.bash'], 'file completion for --config');
  t.same(complete('cutout photo.jpg cutout.f'), ['cutout.fish'], 'inputs are files');
  t.ok(complete('cutout serve --').includes('--allow-private-network'));
  t.notOk(complete('cutout serve --').includes('--size'), 'remove flags stay on remove');
  t.ok(complete('cutout photo.jpg --').includes('--skip-existing'), 'implicit remove');
  t.ok(complete('cutout keys create --').includes('--account'));
  t.same(complete('cutout --key k keys '), ['create', 'list', 'revoke'], 'a value after a flag at a line\'s end of value_opts');
  t.same(complete('cutout --position '), ['center', 'original'], 'an image flag\'s values, from the table');
  t.same(complete('cutout --roi '), [], 'a free value: nothing offered');
  t.same(complete('cutout --bg-image cutout.b'), ['cutout.bash'], 'a picture is a file');
});

t.test('the image-flag block of each script is the one the options table gives (npm run completions rewrites it)', async (t) => {
  const { withImageFlags, imageFlagBlock } = await import('../../src/completion-blocks.js');
  for (const shell of SHELLS) {
    const text = readFileSync(scriptPath(shell), 'utf8');
    t.equal(withImageFlags(text, shell), text, `${shell}: up to date (else run npm run completions)`);
  }
  // A made-up row reaches all three scripts with its values.
  const { OPTION_TABLE } = await import('../../src/options.js');
  const made = { ...OPTION_TABLE[0], key: 'feather', flag: '--feather <px>', completion: { summary: 'blur the matte\'s edge', values: ['1px', '2px'] } };
  const table = [...OPTION_TABLE, made] as typeof OPTION_TABLE;
  t.match(imageFlagBlock('bash', table).join('\n'), /--feather\) COMPREPLY=\(\$\(compgen -W '1px 2px'/);
  t.match(imageFlagBlock('zsh', table).join('\n'), /'--feather=\[blur the matte'"'"'s edge\]:px:\(1px 2px\)'/);
  t.match(imageFlagBlock('fish', table).join('\n'), /-l feather -x -a '1px 2px' -d 'Blur the matte\\'s edge'/);
  t.throws(() => withImageFlags('#!/bin/bash\n', 'bash'), /no image-flag block/);
});

t.test('the command-flag block of each script is the one the program gives (npm run completions rewrites it)', async (t) => {
  const { withCommandFlags, commandFlagBlock, commandFlags } = await import('../../src/completion-blocks.js');
  for (const shell of SHELLS) {
    const text = readFileSync(scriptPath(shell), 'utf8');
    t.equal(withCommandFlags(text, shell), text, `${shell}: up to date (else run npm run completions)`);
  }
  // A made-up setting flag of serve reaches all three scripts, with what completes its value.
  const p = buildProgram();
  p.commands.find((c) => c.name() === 'serve')!.option('--feather <dir>', "blur the matte's edge (env CUTOUT_FEATHER; default 1)");
  const commands = commandFlags(p);
  t.match(commandFlagBlock('bash', commands).join('\n'), /_cutout_opts_serve='[^']* --feather'/);
  t.match(commandFlagBlock('bash', commands).join('\n'), /--data \| --triton \| --feather\) _cutout_compgen_files directory/);
  t.match(commandFlagBlock('zsh', commands).join('\n'), /'--feather=\[blur the matte'"'"'s edge\]:dir:_directories'/);
  t.match(commandFlagBlock('fish', commands).join('\n'), /-n '__cutout_is serve' -l feather -x -a '\(__fish_complete_directories\)' -d 'Blur the matte\\'s edge'/);
  t.throws(() => withCommandFlags('#!/bin/bash\n', 'bash'), /no command-flag block/);
});

/** Each command and subcommand of the program (`serve`, `keys create`) with its long flags, from commander. */
function commandPaths(): { path: string[]; flags: string[] }[] {
  const longs = (c: Command) => c.options.flatMap((o) => (o.long ? [o.long] : []));
  return buildProgram().commands.flatMap((c) =>
    c.commands.length ? c.commands.map((sub) => ({ path: [c.name(), sub.name()], flags: longs(sub) })) : [{ path: [c.name()], flags: longs(c) }],
  );
}

t.test("every command's flags are completed for that command, in each shell (cutout --help, serve, keys, models, ...)", async (t) => {
  const paths = commandPaths();
  t.ok(paths.some((p) => p.path.join(' ') === 'keys create') && paths.some((p) => p.path.join(' ') === 'models export'), 'the program was read');
  const top = buildProgram().options.flatMap((o) => (o.long ? [o.long] : []));
  const remove = paths.find((p) => p.path[0] === 'remove')!;
  // bash: asked as a person would, at `cutout <command> [<sub>] --`
  const bashFlags = (line: string): string[] => {
    const words = line.split(' ');
    const driver = [
      `source ${JSON.stringify(scriptPath('bash'))}`,
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')})`,
      `COMP_CWORD=${words.length - 1}`,
      '_cutout',
      'printf "%s\\n" "${COMPREPLY[@]}"',
    ].join('\n');
    return execFileSync('bash', ['-c', driver], { encoding: 'utf8' }).split('\n').filter(Boolean);
  };
  const offered = bashFlags('cutout --');
  for (const f of [...remove.flags, ...top, '--help']) t.ok(offered.includes(f), `bash: cutout --help's ${f} at cutout --`);
  for (const { path, flags } of paths) {
    // a subcommand's positional argument first where it has one
    const line = ['cutout', ...path, ...(path.join(' ') === 'keys revoke' ? ['key_1'] : path.join(' ') === 'credits add' ? ['acct_1', '5'] : []), '--'].join(' ');
    const got = bashFlags(line);
    for (const f of [...flags, '--help']) t.ok(got.includes(f), `bash: ${path.join(' ')} ${f}`);
  }
  // zsh: each command's array holds its flags, and the script hands that array to _arguments
  const zsh = readFileSync(scriptPath('zsh'), 'utf8');
  const { optsVariable, imageFlags } = await import('../../src/completion-blocks.js');
  const image = new Set(imageFlags().map((f) => f.long));
  for (const { path, flags } of paths) {
    const name = optsVariable(path);
    const array = new RegExp(`^${name}=\\(\\n([\\s\\S]*?)\\n\\)$`, 'm').exec(zsh)?.[1] ?? '';
    t.ok(array, `zsh: ${name}`);
    t.match(zsh, new RegExp(`\\$${name}\\b`), `zsh: ${name} is used`);
    for (const f of flags) {
      if (path[0] === 'remove' && image.has(f)) continue; // the image block's, checked above
      t.ok(array.includes(`${f}[`) || array.includes(`${f}=[`) || array.includes(`${f}=}`) || array.includes(`${f}}`), `zsh: ${path.join(' ')} ${f}`);
    }
  }
  t.match(zsh, /_cutout_remove_opts=\(\$_cutout_image_opts \$_cutout_opts_remove\)/, 'zsh: remove has the image flags and its own');
  // fish: a `complete` line for each flag under the command's condition
  const fish = readFileSync(scriptPath('fish'), 'utf8');
  for (const { path, flags } of paths) {
    const condition = path[0] === 'remove' ? '__cutout_removing' : path.length === 1 ? `'__cutout_is ${path[0]}'` : `'__cutout_is ${path[0]}; and __fish_seen_subcommand_from ${path[1]}'`;
    for (const f of flags) {
      const line = new RegExp(`^complete -c cutout -n ${condition.replace(/[$()*+.?[\\\]^{|}]/g, '\\$&')} (-s \\w )?-l ${f.slice(2)}\\b`, 'm');
      t.match(fish, line, `fish: ${path.join(' ')} ${f}`);
    }
  }
});

/** Every command and long option of the program, from commander's own description of it. */
function programWords(): { commands: string[]; flags: string[] } {
  const commands: string[] = [];
  const flags = new Set<string>();
  const walk = (c: Command) => {
    for (const o of c.options) if (o.long) flags.add(o.long);
    for (const sub of c.commands) {
      commands.push(sub.name());
      walk(sub);
    }
  };
  walk(buildProgram());
  return { commands, flags: [...flags] };
}

t.test('every script knows every command and flag of the program, and every fixed value', async (t) => {
  const { commands, flags } = programWords();
  t.ok(commands.includes('remove') && flags.includes('--alpha') && flags.includes('--no-decontaminate'), 'the program was read');
  const values = [...SIZES, ...FORMATS, ...QUALITIES, 'soft', 'hard', 'bash', 'zsh', 'fish'];
  for (const shell of SHELLS) {
    const text = readFileSync(scriptPath(shell), 'utf8');
    // fish spells long flags `-l name`
    const has = (flag: string) => text.includes(flag) || (shell === 'fish' && new RegExp(`-l ${flag.slice(2)}\\b`).test(text));
    for (const w of [...commands, ...values]) t.match(text, new RegExp(`\\b${w}\\b`), `${shell}: ${w}`);
    for (const f of [...flags, '--help']) t.ok(has(f), `${shell}: ${f}`);
  }
});

t.test('a reader that closes the pipe early stops the output quietly (no EPIPE crash)', async (t) => {
  const { spawn } = await import('node:child_process');
  const { BIN } = await import('../helpers/cli.js');
  const result = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'models', 'list'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // Close our end at once: every write of the child meets a closed pipe.
    child.stdout.destroy();
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
  t.equal(result.code, 0, 'exit code 0');
  t.notMatch(result.stderr, /EPIPE|Error|at /, `nothing on stderr: ${result.stderr.slice(0, 200)}`);
});

t.test('the command names read before the program loads (cli.ts starts the model early) match the program', async (t) => {
  const { COMMAND_NAMES, runsRemove } = await import('../../src/commands/names.js');
  const registered = buildProgram().commands.map((c) => c.name());
  t.same([...registered].sort(), COMMAND_NAMES.filter((n) => n !== 'help').sort());
  t.ok(runsRemove(['photo.jpg']));
  t.ok(runsRemove(['-q', '--out', 'dir', 'a.jpg']));
  t.ok(runsRemove(['-']), 'stdin');
  t.ok(runsRemove(['remove', 'a.jpg']));
  t.ok(runsRemove(['package.json']), 'an existing file');
  for (const args of [['serve'], ['models', 'list'], ['--json', 'usage'], ['--help'], [], ['model-server', '--port', '0'], ['help'], ['watch', 'photos/']]) {
    t.notOk(runsRemove(args), args.join(' ') || '(no arguments)');
  }
});
