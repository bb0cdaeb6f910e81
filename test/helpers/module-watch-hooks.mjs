// The resolve hook of module-watch.mjs (module.register runs it off the main thread).
import fs from 'node:fs';

let out = null;

export async function initialize(data) {
  out = data.out;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (out && resolved.url.includes('/@opentelemetry/')) fs.appendFileSync(out, `import ${resolved.url}\n`);
  return resolved;
}
