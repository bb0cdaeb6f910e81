#!/usr/bin/env node
// The few `mc` commands compose.yaml uses, against the minio stand-in: `ready URL|local`,
// `alias set NAME URL KEY SECRET` (kept in /tmp), `mb [--ignore-existing] NAME/BUCKET`.
import fs from 'node:fs';
const [cmd, ...rest] = process.argv.slice(2);
const aliases = '/tmp/mc-aliases.json';
const read = () => (fs.existsSync(aliases) ? JSON.parse(fs.readFileSync(aliases, 'utf8')) : {});
if (cmd === 'ready') {
  const url = rest[0] === 'local' ? 'http://127.0.0.1:9000' : rest[0];
  const res = await fetch(url + '/').catch(() => null);
  process.exit(res ? 0 : 1);
} else if (cmd === 'alias' && rest[0] === 'set') {
  fs.writeFileSync(aliases, JSON.stringify({ ...read(), [rest[1]]: rest[2] }));
} else if (cmd === 'mb') {
  const [name, bucket] = rest.filter((a) => !a.startsWith('--'))[0].split('/');
  const res = await fetch(`${read()[name]}/${bucket}`, { method: 'PUT' });
  if (!res.ok && res.status !== 409) { process.stderr.write(`mb: ${res.status}\n`); process.exit(1); }
  process.stdout.write(`Bucket created: ${name}/${bucket}\n`);
} else {
  process.stderr.write(`mc stand-in: ${cmd} is not supported\n`);
  process.exit(2);
}
