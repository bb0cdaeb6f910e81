/** Splits a migration script on semicolons at line ends; `--` comments are stripped first. */
export function splitStatements(script: string): string[] {
  return script
    .split('\n')
    .map((line) => line.replace(/--.*$/, ''))
    .join('\n')
    .split(/;\s*$/m)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
