/** tap's `after` script: stops the run's services daemon (before.ts) and waits until it is gone. */
import { runServices, runServicesFile } from '../helpers/run-services.js';
import { rmSync } from 'node:fs';

const services = runServices();
if (services) {
  try {
    process.kill(services.pid, 'SIGUSR2');
    for (let i = 0; i < 200; i++) {
      process.kill(services.pid, 0);
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch {
    // gone
  }
  rmSync(runServicesFile(process.ppid), { force: true });
  rmSync(runServicesFile(process.ppid).replace(/\.json$/, '.log'), { force: true });
}
