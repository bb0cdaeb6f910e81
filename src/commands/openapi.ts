/** `cutout openapi`: prints the OpenAPI 3.1.0 document that `GET /api/v1/openapi.json` serves. */
import type { Command } from 'commander';
import { addSettingFlags } from './setting-flags.js';

export function registerOpenapi(program: Command): void {
  // --data and --config are taken as by every command (cli-contract); the document depends on neither.
  addSettingFlags(program
    .command('openapi')
    .description('print the OpenAPI 3.1.0 document of the v1 API'), 'openapi')
    .action(async () => {
      const { openapiDocument } = await import('../server/v1/openapi.js');
      process.stdout.write(JSON.stringify(openapiDocument, null, 2) + '\n');
    });
}
