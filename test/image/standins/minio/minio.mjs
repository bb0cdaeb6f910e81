#!/usr/bin/env node
// `minio server DIR --address [HOST]:PORT` over s3rver: the same S3 API for the tests (no signature check).
import S3rver from 's3rver';
const args = process.argv.slice(2);
const dir = args[1] ?? '/data';
const address = args[args.indexOf('--address') + 1] ?? ':9000';
const port = Number(address.split(':').pop());
const server = new S3rver({ port, address: '0.0.0.0', directory: dir, silent: true });
await server.run();
process.stdout.write(`s3rver (minio stand-in) on :${port}\n`);
for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => server.close().then(() => process.exit(0)));
