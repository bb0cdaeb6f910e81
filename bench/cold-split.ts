/**
 * `node dist-bench/cold-split.js PHOTO MODEL [fp32|int8]`: a child of `npm run bench` that times a first
 * image's phases from process start (node's start, module loading, checksum, session creation,
 * first run) and a second run of the same image. Nothing is imported before the clock reads, so
 * the module loading is part of what is timed.
 */
const atStart = performance.now();
const { coldSplit } = await import('./speed-precision.js');
await coldSplit(process.argv[2], process.argv[3] ?? 'isnet-medium', atStart, process.argv[4] === 'int8' ? 'int8' : 'fp32');
