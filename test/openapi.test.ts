import t from 'tap';
import { validate, dereference, compileErrors } from '@readme/openapi-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { openapiDocument } from '../src/server/v1/openapi.js';
import { resultHeaderNames } from '../src/result-fields.js';
import { ERROR_TABLE } from '../src/errors.js';
import { LIMITS } from '../src/limits.js';
import { IMAGE_FORMATS as FORMATS, SIZES, TYPES } from '../src/options.js';

/** A fresh copy: the parser dereferences in place, and the served document must keep its $refs. */
const copy = (): any => structuredClone(openapiDocument);

/** Resolves to an error message when the document is refused (thrown or reported), else null. */
async function refusal(doc: any): Promise<string | null> {
  try {
    const r = await validate(doc);
    return r.valid ? null : compileErrors(r);
  } catch (err) {
    return (err as Error).message;
  }
}

const PATHS: Record<string, string[]> = {
  '/api/v1/remove': ['post'],
  '/api/v1/results/{job_id}': ['get'],
  '/api/v1/jobs': ['post'],
  '/api/v1/jobs/{job_id}': ['get'],
  '/api/v1/jobs/batch': ['post'],
  '/api/v1/account': ['get'],
  '/api/v1/usage': ['get'],
  '/api/v1/removals': ['get'],
  '/api/v1/health': ['get'],
  '/api/v1/openapi.json': ['get'],
  '/api/v1/errors': ['get'],
  '/readyz': ['get'],
  '/metrics': ['get'],
  '/api/v1/admin/keys': ['post', 'get'],
  '/api/v1/admin/keys/{id}': ['get', 'patch', 'delete'],
  '/api/v1/admin/accounts/{id}/credits': ['post'],
  '/api/v1/admin/accounts/{id}': ['get'],
  '/api/v1/admin/audit': ['get'],
};

t.test('the document is a valid OpenAPI 3.1.0 document', async (t) => {
  const r = await validate(copy());
  t.ok(r.valid, r.valid ? 'valid' : compileErrors(r));
  t.same(r.warnings, [], 'no warnings');
  t.equal(openapiDocument.openapi, '3.1.0');
  t.equal(openapiDocument.info.version, '1.0.0');
  t.equal(openapiDocument.info.title, 'cutout API');
  t.same(JSON.parse(JSON.stringify(openapiDocument)), openapiDocument, 'plain JSON data');
  t.match(JSON.stringify(openapiDocument), /"\$ref"/, 'validation did not dereference the exported object');
  t.ok(Object.isFrozen(openapiDocument.paths['/api/v1/remove'].post), 'deeply frozen');
});

t.test('the validator is live: broken documents are refused', async (t) => {
  const dangling = copy();
  dangling.paths['/api/v1/account'].get.responses['200'].content['application/json'].schema = {
    $ref: '#/components/schemas/NoSuchSchema',
  };
  t.match(await refusal(dangling), /NoSuchSchema|resolve|pointer/i, 'dangling $ref');

  const noDescription = copy();
  delete noDescription.paths['/api/v1/health'].get.responses['200'].description;
  t.ok(await refusal(noDescription), 'response without description');

  const undeclaredPathParam = copy();
  undeclaredPathParam.paths['/api/v1/jobs/{job_id}'].get.parameters = [];
  t.ok(await refusal(undeclaredPathParam), 'path parameter not declared');
});

t.test('every endpoint of the spec is described', async (t) => {
  for (const [path, methods] of Object.entries(PATHS)) {
    for (const m of methods) t.ok(openapiDocument.paths[path]?.[m], `${m.toUpperCase()} ${path}`);
  }
  t.same(Object.keys(openapiDocument.paths).sort(), Object.keys(PATHS).sort(), 'and nothing else');
});

t.test('enums and limits come from the code', async (t) => {
  const doc: any = await dereference(copy());
  const s = doc.components.schemas;
  const codes: string[] = s.Error.properties.error.properties.code.enum;
  for (const code of Object.keys(ERROR_TABLE)) t.ok(codes.includes(code), `error code ${code} in the Error schema`);
  t.same(s.JobError.properties.code.enum, codes, 'job errors use the same codes');
  t.same(s.Size.enum, SIZES);
  t.same(s.Format.enum, FORMATS);
  t.same(s.SubjectType.enum, TYPES);
  t.equal(s.Size.default, 'preview');
  t.equal(s.Format.default, 'png');
  t.equal(s.BatchRequest.properties.images.maxItems, LIMITS.maxBatchImages);
  t.equal(s.Usage.properties.days.maxItems, LIMITS.usageDays);
  t.same(s.Account.properties.plan.enum, ['free', 'paid', 'marketplace'], 'a test key is free with test: true');
  t.same(s.Health.properties.inference.enum, ['local', 'upstream']);
  t.same(s.Job.properties.status.enum, ['queued', 'processing', 'done', 'failed']);

  const item = s.BatchItem.properties;
  for (const k of ['image_url', 'image_file_b64', 'size', 'format', 'bg_color', 'crop', 'type']) t.ok(item[k], `batch item ${k}`);
  t.notOk(item.image_file, 'no upload in a batch item');
  const multipart = doc.paths['/api/v1/jobs'].post.requestBody.content['multipart/form-data'].schema.properties;
  t.equal(multipart.image_file.format, 'binary');
  t.notOk(multipart.bg_image_file, 'a job takes its background picture by URL');
  const removeParts = doc.paths['/api/v1/remove'].post.requestBody.content['multipart/form-data'].schema.allOf;
  t.equal(removeParts[0].properties.image_file.format, 'binary');
  t.equal(removeParts[1].properties.bg_image_file.format, 'binary', '/remove takes an uploaded background picture');
  t.notOk(doc.paths['/api/v1/jobs/batch'].post.requestBody.content['multipart/form-data'], 'batch is JSON only');
});

t.test('operations carry their headers, responses and auth', async (t) => {
  const doc: any = await dereference(copy());
  const op = (path: string, m = 'get') => doc.paths[path][m];
  const params = (o: any) => (o.parameters ?? []).map((p: any) => `${p.in}:${p.name}`);

  const remove = op('/api/v1/remove', 'post');
  t.same(Object.keys(remove.responses).sort(), ['200', '400', '401', '402', '422', '429', '500', '503', '504']);
  t.ok(remove.responses['503'].headers['Retry-After'], 'an upstream outage answers 503 with Retry-After');
  t.match(remove.responses['503'].description, /upstream inference server is unavailable/);
  t.same(Object.keys(remove.responses['200'].content).sort(), ['application/json', 'image/gif', 'image/jpeg', 'image/png', 'image/webp']);
  t.same(
    Object.keys(remove.responses['200'].headers).sort(),
    ['X-Credits-Charged', 'X-Credits-Remaining', 'X-Cutout-Size', 'X-Job-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'X-Request-Id', ...resultHeaderNames('v1')].sort(),
    'the route\'s own headers and the result fields\' (result-fields.ts, X-Cutout-Confidence, ...)',
  );
  t.ok(resultHeaderNames('v1').includes('X-Cutout-Confidence'));
  for (const h of ['header:Authorization', 'header:Accept', 'header:Idempotency-Key']) t.ok(params(remove).includes(h), h);
  t.equal(remove.parameters.find((p: any) => p.name === 'Authorization').required, false, 'Authorization declared optional (5.6)');
  t.ok(remove.responses['429'].headers['Retry-After']);

  const jobs = op('/api/v1/jobs', 'post');
  t.ok(params(jobs).includes('header:X-Callback-Url'));
  t.ok(jobs.responses['202']);
  t.ok(jobs.responses['503'].headers['Retry-After']);
  t.equal(jobs.responses['202'].content['application/json'].schema.properties.status.const, 'queued');

  const batch = op('/api/v1/jobs/batch', 'post');
  t.ok(params(batch).includes('header:X-Callback-Url'));
  t.ok(batch.responses['202'].content['application/json'].schema.properties.job_ids);
  t.ok(batch.responses['400'] && batch.responses['422']);

  for (const [path, m] of [['/api/v1/jobs', 'post'], ['/api/v1/jobs/batch', 'post']]) {
    const cb = op(path, m).callbacks?.jobCompleted?.['{$request.header.X-Callback-Url}']?.post;
    t.ok(cb, `callback on ${path}`);
    t.ok(cb.parameters.some((p: any) => p.name === 'X-Service-Signature' && p.required), 'signed');
    t.ok(cb.requestBody.content['application/json'].schema.properties.job_id);
  }

  const result = op('/api/v1/results/{job_id}');
  t.same(result.security, [], 'results need no auth');
  t.same(Object.keys(result.responses).sort(), ['200', '302', '404', '422', '503'], 'a redirect under --results-redirect; 503 when the object store is down');
  t.equal(result.parameters[0].schema.format, 'uuid');
  t.same(op('/api/v1/health').security, [], 'health needs no auth');
  t.same(op('/api/v1/errors').security, [], 'the error reference needs no auth');
  t.same(Object.keys(op('/api/v1/errors').responses['200'].content).sort(), ['application/json', 'text/html; charset=utf-8']);
  t.match(openapiDocument.components.schemas.Size.description, /Absent: `preview`.*defaults to `full`/, 'the API\'s and the CLI\'s size defaults are said');
  t.match(openapiDocument.info.description, /what a request without `size` gets/);
  t.same(op('/api/v1/openapi.json').security, [], 'the document needs no auth');
  t.same(op('/metrics').security, [], 'metrics need no auth');
  // Every operation takes an X-Request-Id and every answer (errors too) carries one.
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [m, operation] of Object.entries<any>(item)) {
      t.ok(params(operation).includes('header:X-Request-Id'), `${m} ${path} takes X-Request-Id`);
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        t.ok(response.headers?.['X-Request-Id'], `${m} ${path} ${status} carries X-Request-Id`);
      }
    }
  }
  t.same(doc.security, [{ bearerAuth: [] }], 'bearer auth everywhere else');
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    if (!path.startsWith('/api/v1/admin/')) continue;
    for (const [m, operation] of Object.entries<any>(item)) {
      t.same(operation.tags, ['admin'], `${m} ${path}: under the admin tag`);
      t.same(operation.security, [{ adminToken: [] }], `${m} ${path}: the admin token`);
      t.ok(operation.responses['401'] && operation.responses['403'], `${m} ${path}: 401 and 403`);
    }
  }
  t.ok(doc.tags.some((tag: any) => tag.name === 'admin'), 'the admin tag is declared');
  t.equal(doc.components.securitySchemes.bearerAuth.scheme, 'bearer');

  const errorCodeOf = (r: any) => r.content['application/json'].example?.error?.code;
  t.equal(errorCodeOf(op('/api/v1/jobs/{job_id}').responses['404']), 'not_found');
  t.equal(errorCodeOf(op('/api/v1/account').responses['401']), 'invalid_api_key');
});

t.test('every response example matches its schema, and so do the real 422 bodies', async (t) => {
  const doc: any = await dereference(copy());
  // OpenAPI 3.1 schemas are JSON Schema 2020-12; formats (uri, uuid) are documentation here.
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  let checked = 0;
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      for (const [status, response] of Object.entries<any>(operation.responses ?? {})) {
        for (const [type, media] of Object.entries<any>(response.content ?? {})) {
          if (media.example === undefined || !media.schema) continue;
          const ok = ajv.validate(media.schema, media.example);
          t.ok(ok, `${method.toUpperCase()} ${path} ${status} ${type}: ${ok ? 'valid' : ajv.errorsText()}`);
          checked++;
        }
      }
    }
  }
  t.ok(checked >= 10, `${checked} examples checked`);

  const error422 = doc.components.responses.Error422.content['application/json'].schema;
  // The shapes the server sends (routes-results.ts, routes-jobs.ts): error and detail together.
  const bodies = [
    { error: { code: 'invalid_request', message: 'job_id must be a UUID v4.', docs: 'https://x/#errors' }, detail: [{ loc: ['path', 'job_id'], msg: 'm', type: 'uuid_parsing' }] },
    { error: { code: 'no_subject_detected', message: 'm', docs: 'https://x/#errors' } },
    { detail: [{ loc: ['body', 'images', 0, 'size'], msg: 'm', type: 'invalid_request' }] },
  ];
  for (const body of bodies) t.ok(ajv.validate(error422, body), `422 body ${JSON.stringify(body).slice(0, 60)}: ${ajv.errorsText()}`);
  t.notOk(ajv.validate(error422, { message: 'neither shape' }), 'a body of neither shape is refused');
});

