/**
 * `cutout health [--url URL]`: asks a running server's `/readyz` and exits 0 when it is ready, 1
 * otherwise, printing its answer (cli-contract "The container image"). It is the image's
 * HEALTHCHECK: exec form through cutout's own binary, so the image needs no curl or wget, as
 * imgproxy's `imgproxy health`. By default it asks the server this configuration would start
 * (`CUTOUT_PORT`, `--port` of the config file...) on 127.0.0.1, which a server bound to 0.0.0.0
 * answers too.
 */
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { addSettingFlags, flagsGiven } from './setting-flags.js';

/** A probe that hangs is a failed probe: Docker's own timeout would only kill it later. */
const HEALTH_TIMEOUT_MS = 5000;

export function registerHealth(program: Command): void {
  const command = program
    .command('health')
    .description("ask a running server's /readyz; exit 0 when ready, 1 otherwise (the container image's health check)")
    .option('--url <url>', "the server's base URL (default: http://127.0.0.1:PORT of this configuration), or a probe URL with its path (a model server's http://127.0.0.1:8000/v2/health/ready)");
  addSettingFlags(command, 'health')
    .action(async (flags: { url?: string; config?: string; data?: string }) => {
      const config = await loadConfig(flagsGiven(null, flags, 'health'));
      const probe = probeUrl(flags.url ?? `http://127.0.0.1:${config.port}`);
      try {
        const res = await fetch(probe, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
        const body = (await res.text()).trim();
        process.stdout.write(`${res.status} ${body}\n`);
        process.exitCode = res.status === 200 ? 0 : 1;
      } catch (err) {
        const e = err as Error & { cause?: { code?: string } };
        process.stdout.write(`cannot reach ${probe}: ${e.cause?.code ?? e.name ?? e.message}\n`);
        process.exitCode = 1;
      }
    });
}

/** A base URL gets `/readyz`; a URL with a path of its own (a model server's readiness) is asked as it is. */
export function probeUrl(url: string): string {
  const parsed = new URL(url);
  return parsed.pathname === '/' || parsed.pathname === '' ? `${url.replace(/\/+$/, '')}/readyz` : url;
}
