/**
 * `cutout completion bash|zsh|fish`: prints the completion script shipped in `completions/`.
 * The scripts are written by hand, one idiomatic file per shell, but for their two blocks written
 * from the tables by `npm run completions` (src/completion-blocks.ts); this command only finds and prints them.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { addSettingFlags } from './setting-flags.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

/** `completions/` of the package: two levels up from src/commands/ (tests) and dist/commands/ (built). */
const COMPLETIONS_DIR = new URL('../../completions/', import.meta.url);

/** The completion script for a shell, as shipped in `completions/cutout.<shell>`. */
export function completionScript(shell: Shell): string {
  return readFileSync(new URL(`cutout.${shell}`, COMPLETIONS_DIR), 'utf8');
}

export function registerCompletion(program: Command): void {
  // --data and --config are taken as by every command (cli-contract); the scripts depend on neither.
  addSettingFlags(program
    .command('completion')
    .description('print a shell completion script (bash, zsh or fish)')
    .argument('<shell>', `one of ${SHELLS.join(', ')}`), 'completion')
    .addHelpText(
      'after',
      [
        '',
        'Install:',
        '  bash:  source <(cutout completion bash)          # in ~/.bashrc',
        '  zsh:   source <(cutout completion zsh)           # in ~/.zshrc, after compinit',
        '  fish:  cutout completion fish > ~/.config/fish/completions/cutout.fish',
      ].join('\n'),
    )
    .action((shell: string) => {
      const name = shell.trim().toLowerCase();
      if (!(SHELLS as readonly string[]).includes(name)) {
        // Exit code 2: a usage error (cli-contract), like every other bad value.
        program.error(`error: unknown shell ${JSON.stringify(shell)}; supported shells: ${SHELLS.join(', ')}`, {
          exitCode: 2,
          code: 'cutout.unknownShell',
        });
      }
      const write = program.configureOutput().writeOut ?? ((s: string) => process.stdout.write(s));
      write(completionScript(name as Shell));
    });
}
