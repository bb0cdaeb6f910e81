/**
 * The web playground at GET /, driven in headless Chromium (Debian's `chromium` at
 * /usr/bin/chromium, through playwright-core; no browser download). The real `cutout serve` runs
 * with a fresh data directory and key; the page uploads a fixture, and the cutout is checked
 * through the page itself (the result <img> drawn on a canvas).
 *
 * Without Chromium (a fresh machine), the file is skipped with a message naming the package. Under
 * CI (CI=true, where .ci/run installs it) a missing or broken browser fails instead, so CI can
 * never skip it silently; a browser that is installed but cannot start always fails.
 *
 * Screenshots go to .tap/playground/. docs/playground.png (the README's) is written when it is
 * missing or when CUTOUT_UPDATE_SCREENSHOT=1, so a plain `npm test` leaves the checkout clean.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { chromium, type Browser, type Page } from 'playwright-core';
import { bearer, createKey, startServe, type ServeProcess } from '../helpers/api-server.js';
import { FIXTURES, ROOT } from '../helpers/cli.js';

// The page's globals, for the callbacks that page.evaluate runs in Chromium (the tests' type check
// has Node's types, not the DOM's, whose fetch and Blob types differ from Node's).
declare const document: any;
declare const window: any;
declare const localStorage: any;
declare const MutationObserver: any;

const CHROMIUM = '/usr/bin/chromium';
const ASTRONAUT = path.join(FIXTURES, 'astronaut.jpg'); // 512x512
const OUT_DIR = path.join(ROOT, '.tap', 'playground');
const DOCS_SCREENSHOT = path.join(ROOT, 'docs', 'playground.png');

const INSTALL_HINT = 'install it with: apt-get install -y --no-install-recommends chromium';
if (!existsSync(CHROMIUM) && process.env.CI !== 'true') {
  t.plan(0, `Chromium is not installed at ${CHROMIUM}, so the browser test is skipped (${INSTALL_HINT}); under CI=true this fails instead`);
  process.exit(0);
}

let browser: Browser;
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
} catch (err) {
  // Fail loudly, with the fix: this test must never pass without a browser.
  t.fail(`Chromium could not start from ${CHROMIUM} (${INSTALL_HINT}): ${(err as Error).message}`);
  t.end();
  process.exit(1);
}
t.teardown(() => browser.close());
await fs.mkdir(OUT_DIR, { recursive: true });

/** A page that records script errors, CSP violations and every URL it asks for. */
async function openPage(t: Tap.Test, srv: ServeProcess, viewport = { width: 1200, height: 860 }): Promise<{ page: Page; problems: string[]; requests: string[] }> {
  const context = await browser.newContext({ viewport });
  t.teardown(() => context.close());
  const page = await context.newPage();
  const problems: string[] = [];
  const requests: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // A failed API call (e.g. the 401 test) logs a resource error; CSP violations and script errors do not look like that.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('request', (r) => requests.push(r.url()));
  const res = await page.goto(`${srv.url}/`);
  t.equal(res?.status(), 200, 'the page loads');
  return { page, problems, requests };
}

/** Every request the page made went to this server (or a blob: of its own). */
function onlyOwnOrigin(t: Tap.Test, srv: ServeProcess, requests: string[]): void {
  const foreign = requests.filter((u) => !u.startsWith(`${srv.url}/`) && !u.startsWith(`blob:${srv.url}/`) && !u.startsWith('data:'));
  t.same(foreign, [], 'the page asks nothing of another origin');
  const api = requests.filter((u) => u.startsWith(`${srv.url}/api/`));
  t.ok(api.every((u) => u.startsWith(`${srv.url}/api/v1/`)), `the page uses only public /api/v1 routes: ${api.map((u) => new URL(u).pathname).join(', ')}`);
}

/** Alpha of the result <img> at points given in 512x512 coordinates, read through a canvas in the page. */
function resultAlphas(page: Page, points: [number, number][]): Promise<{ width: number; height: number; alphas: number[] }> {
  return page.evaluate((pts) => {
    const img = document.getElementById('result') as any;
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const g = canvas.getContext('2d')!;
    g.drawImage(img, 0, 0);
    const sx = img.naturalWidth / 512;
    const sy = img.naturalHeight / 512;
    const alphas = pts.map(([x, y]) => g.getImageData(Math.floor(x * sx), Math.floor(y * sy), 1, 1).data[3]);
    return { width: img.naturalWidth, height: img.naturalHeight, alphas };
  }, points);
}

t.test('GET / and its assets: strict CSP, nosniff, nothing external, no inline code', async (t) => {
  const srv = await startServe(t, ['--workers', '1']);
  const res = await fetch(`${srv.url}/`);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
  t.equal(res.headers.get('x-content-type-options'), 'nosniff');
  const csp = res.headers.get('content-security-policy') ?? '';
  const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name, values.join(' ')]));
  t.equal(directives.get('default-src'), "'self'");
  t.equal(directives.get('script-src'), "'self'");
  t.equal(directives.get('style-src'), "'self'");
  t.equal(directives.get('connect-src'), "'self'");
  t.equal(directives.get('img-src'), "'self' blob: data:");
  t.equal(directives.get('object-src'), "'none'");
  t.equal(directives.get('frame-ancestors'), "'none'");
  t.notMatch(csp, /unsafe-inline|unsafe-eval|https?:|\*/, 'no unsafe-* source, no wildcard, no other host');

  const html = await res.text();
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, 'no inline <script>');
  t.notMatch(html, /<style|\sstyle=|\son[a-z]+=/i, 'no inline style or event handler attribute');
  const refs = [...html.matchAll(/\s(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
  t.ok(refs.length > 0);
  t.same(refs.filter((r) => /^(?:[a-z]+:)?\/\//i.test(r)), [], `every src/href is served by cutout (${refs.join(', ')})`);

  for (const [asset, type] of [['/playground/app.js', 'text/javascript; charset=utf-8'], ['/playground/app.css', 'text/css; charset=utf-8'], ['/playground/icon.svg', 'image/svg+xml']]) {
    const a = await fetch(`${srv.url}${asset}`);
    t.equal(a.status, 200, asset);
    t.equal(a.headers.get('content-type'), type, `${asset} content type`);
    t.equal(a.headers.get('x-content-type-options'), 'nosniff', `${asset} nosniff`);
    t.equal(a.headers.get('content-security-policy'), csp, `${asset} carries the same policy`);
    const body = await a.text();
    t.notMatch(body, /https?:\/\/(?!www\.w3\.org\/2000\/svg)[a-z0-9]/i, `${asset} names no other host`);
  }
  const head = await fetch(`${srv.url}/`, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD / answers too');
});

t.test('--no-playground: GET / is a 404 with the error body, the API still serves', async (t) => {
  const srv = await startServe(t, ['--workers', '1', '--no-playground']);
  for (const p of ['/', '/playground/app.js', '/playground/app.css']) {
    const res = await fetch(`${srv.url}${p}`);
    t.equal(res.status, 404, p);
    const body = (await res.json()) as any;
    t.equal(body.error?.code, 'not_found', `${p} code`);
    t.match(body.error?.message, /playground/, `${p} says why`);
    t.type(body.error?.docs, 'string');
  }
  t.equal((await fetch(`${srv.url}/api/v1/health`)).status, 200);
});

t.test('in Chromium: upload, cutout, credits, download, screenshots, keyboard, narrow window', async (t) => {
  const srv = await startServe(t, ['--workers', '1']);
  const key = await createKey(srv.dataDir);
  const { page, problems, requests } = await openPage(t, srv);

  await page.fill('#key', key.key);
  await page.setInputFiles('#file', ASTRONAUT);
  await page.selectOption('#size', 'full');
  await page.waitForFunction(() => /512×512/.test(document.getElementById('picked')?.textContent ?? ''));
  const started = Date.now();
  await page.click('#go');
  await page.waitForSelector('#result:not([hidden])', { timeout: 120_000 });
  t.pass(`cutout shown after ${Date.now() - started} ms`);

  const { width, height, alphas } = await resultAlphas(page, [[3, 3], [508, 3], [210, 140], [180, 400]]);
  t.same([width, height], [512, 512], 'size=full keeps the native size');
  const [tl, tr, face, chest] = alphas;
  t.ok(tl < 16 && tr < 16, `the corners are transparent in the page (${tl}, ${tr})`);
  t.ok(face > 240 && chest > 240, `the subject is opaque in the page (${face}, ${chest})`);

  t.match(await page.textContent('#credits'), /Credits charged: 1\b.*credits remaining: 9\b/, 'credits charged and left are shown');
  t.match(await page.textContent('#confidence'), /confidence (0\.\d\d|1\.00)/, 'the cutout\'s confidence is shown beside it');
  t.match(await page.textContent('#status'), /Done in/);
  t.equal(await page.isHidden('#error'), true, 'no error shown');
  const download = await page.getAttribute('#download', 'href');
  t.match(download, /^blob:/, 'the download link holds the result');
  t.equal(await page.getAttribute('#download', 'download'), 'astronaut.cutout.png');
  t.equal(await page.evaluate(() => localStorage.getItem('cutout.playground.apiKey')), key.key, 'the key is kept in localStorage');
  t.equal((await page.$$('#original:not([hidden])')).length, 1, 'the original is shown next to the cutout');

  // The downloaded bytes are the PNG the API stored.
  const [saved] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  t.equal(saved.suggestedFilename(), 'astronaut.cutout.png', 'the download is named after the upload');
  const meta = await sharp(await fs.readFile(await saved.path())).metadata();
  t.same([meta.format, meta.width, meta.height, meta.hasAlpha], ['png', 512, 512, true], 'the download is the 512x512 PNG with alpha');

  const shot = path.join(OUT_DIR, 'playground.png');
  await page.screenshot({ path: shot, fullPage: true });
  t.pass(`screenshot saved to ${path.relative(ROOT, shot)}`);
  const refresh = process.env.CUTOUT_UPDATE_SCREENSHOT === '1' || !(await fs.stat(DOCS_SCREENSHOT).catch(() => null));
  if (refresh) await fs.copyFile(shot, DOCS_SCREENSHOT);

  // A reload keeps the key (localStorage) and nothing else.
  await page.reload();
  t.equal(await page.inputValue('#key'), key.key, 'the key survives a reload');

  // Above the fold at 1280x900: the key and the button, also with "More" open (the button stays in reach).
  await page.setViewportSize({ width: 1280, height: 900 });
  for (const more of [false, true]) {
    if (more) await page.click('#more > summary');
    await page.evaluate(() => window.scrollTo(0, 0));
    for (const id of ['key', 'go']) {
      const box = await page.locator(`#${id}`).boundingBox();
      t.ok(box && box.y >= 0 && box.y + box.height <= 900, `#${id} is in the first screen at 1280x900${more ? ' with More open' : ''} (${JSON.stringify(box)})`);
    }
  }
  await page.click('#more > summary');

  // Every control is reachable with Tab, in order.
  await page.focus('#url');
  await page.evaluate(() => (document.activeElement as any).blur());
  const reached: string[] = [];
  for (let i = 0; i < 25; i++) {
    await page.keyboard.press('Tab');
    const id = await page.evaluate(() => document.activeElement?.id || document.activeElement?.tagName || '');
    if (id && !reached.includes(id)) reached.push(id);
  }
  for (const id of ['file', 'url', 'size', 'format', 'transparent', 'crop', 'key', 'go']) t.ok(reached.includes(id), `#${id} is reachable with Tab`);
  // Every form control has a label.
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select')].filter((el) => !(el as any).labels?.length && !el.getAttribute('aria-label')).map((el) => el.id));
  t.same(unlabelled, [], 'every control is labelled');

  // A narrow window: one column, no sideways scrolling.
  await page.setViewportSize({ width: 360, height: 780 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  t.ok(overflow <= 0, `no horizontal scroll at 360 px (overflow ${overflow})`);
  await page.screenshot({ path: path.join(OUT_DIR, 'playground-narrow.png'), fullPage: true });

  t.same(problems, [], 'no script error or CSP violation');
  onlyOwnOrigin(t, srv, requests);
  t.ok(requests.some((u) => u === `${srv.url}/api/v1/remove`), 'a small image goes through POST /api/v1/remove');
});

t.test('in Chromium: a page on another origin calls remove.bg\'s and rembg\'s dialects with X-Api-Key (preflight answered, headers readable)', async (t) => {
  const srv = await startServe(t, ['--workers', '1'], { env: { CUTOUT_QUALITY: 'fast' } });
  const key = await createKey(srv.dataDir);
  const photo = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
  // The shop's own site: another origin (another port) than the server's.
  const site = http.createServer((req, res) => {
    if (req.url === '/photo.jpg') return void res.writeHead(200, { 'Content-Type': 'image/jpeg' }).end(photo);
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end('<!doctype html><title>a shop</title>');
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => site.close(resolve)));
  const context = await browser.newContext();
  t.teardown(() => context.close());
  const page = await context.newPage();
  await page.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
  t.not(new URL(page.url()).origin, new URL(srv.url).origin, 'the page is on another origin');
  const seen = await page.evaluate(async ({ api, apiKey }) => {
    const image = await (await fetch('/photo.jpg')).blob();
    const form = new FormData();
    form.append('image_file', image, 'photo.jpg');
    form.append('size', 'preview');
    const removed = await fetch(`${api}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': apiKey }, body: form });
    const png = Array.from(new Uint8Array(await removed.arrayBuffer()).slice(1, 4));
    const account = await fetch(`${api}/v1.0/account`, { headers: { 'X-Api-Key': apiKey } });
    const rembgForm = new FormData();
    rembgForm.append('file', image, 'photo.jpg');
    const rembg = await fetch(`${api}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': apiKey }, body: rembgForm });
    await rembg.arrayBuffer();
    return {
      status: removed.status, type: removed.headers.get('content-type'), png: String.fromCharCode(...png),
      width: removed.headers.get('x-width'), charged: removed.headers.get('x-credits-charged'),
      account: account.status, total: ((await account.json()) as any).data.attributes.credits.total,
      rembg: rembg.status, rembgType: rembg.headers.get('content-type'),
    };
  }, { api: srv.url, apiKey: key.key });
  t.match(seen, { status: 200, type: 'image/png', png: 'PNG', account: 200, total: 10, rembg: 200, rembgType: 'image/png' }, 'each call went through (Chromium preflights a cross-origin X-Api-Key)');
  t.same([seen.width, seen.charged], ['451', '0'], 'the page reads remove.bg\'s X-* headers (exposed)');
});

t.test('in Chromium: an API error shows its error.message', async (t) => {
  const srv = await startServe(t, ['--workers', '1']);
  const wrongKey = 'cut_live_' + 'x'.repeat(32);
  const expected = (await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(wrongKey) })).json()) as any;
  t.equal(expected.error.code, 'invalid_api_key');
  const { page, problems } = await openPage(t, srv);

  // No key at all: the page says so before calling anything.
  await page.setInputFiles('#file', ASTRONAUT);
  await page.click('#go');
  await page.waitForSelector('#error:not([hidden])');
  t.match(await page.textContent('#error'), /API key/);

  const first = await page.textContent('#error');
  await page.fill('#key', wrongKey);
  await page.click('#go');
  await page.waitForFunction((before) => {
    const text = document.getElementById('error')?.textContent ?? '';
    return text !== '' && text !== before;
  }, first, { timeout: 60_000 });
  const text = (await page.textContent('#error'))?.trim();
  t.equal(text, expected.error.message, 'the error region shows the API error.message in plain words');
  t.equal(await page.getAttribute('#error', 'aria-live'), 'assertive', 'in an aria-live region');
  t.equal(await page.isHidden('#result'), true, 'no result');
  t.equal(await page.getAttribute('#go', 'aria-disabled'), 'false', 'the button is usable again');
  t.same(problems, [], 'no script error or CSP violation');
});

t.test('in Chromium: a large image at size=full goes through /jobs with a progress state', async (t) => {
  const srv = await startServe(t, ['--workers', '1']);
  const key = await createKey(srv.dataDir);
  // 2100x2100 = 4.41 MP: over the 4 MP limit of sync /remove at size=full.
  const large = path.join(await fs.mkdtemp(path.join(srv.dataDir, 'large-')), 'astronaut-large.jpg');
  await sharp(ASTRONAUT).resize(2100, 2100).jpeg({ quality: 90 }).toFile(large);
  const { page, problems, requests } = await openPage(t, srv);

  await page.fill('#key', key.key);
  await page.setInputFiles('#file', large);
  await page.selectOption('#size', 'full');
  await page.waitForFunction(() => /2100×2100/.test(document.getElementById('picked')?.textContent ?? ''));
  // Record what the status line and the progress bar show while the job runs.
  await page.evaluate(() => {
    const seen: string[] = ((window as any).__seen = []);
    const status = document.getElementById('status')!;
    const box = document.getElementById('progress-box')!;
    new MutationObserver(() => {
      seen.push(`${box.hidden ? 'idle' : 'progress'}|${status.textContent}`);
    }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['hidden'] });
  });
  await page.click('#go');
  await page.waitForSelector('#result:not([hidden])', { timeout: 240_000 });

  const seen = (await page.evaluate(() => (window as any).__seen)) as string[];
  t.ok(seen.some((s) => /^progress\|Large image: background job .*(Queued|Processing)/.test(s)), `a visible progress state while the job runs (${seen.filter((s) => s.startsWith('progress')).slice(0, 3).join(' / ')})`);
  const { width, height, alphas } = await resultAlphas(page, [[3, 3], [508, 3], [210, 140], [180, 400]]);
  t.same([width, height], [2100, 2100], 'the full-size result');
  t.ok(alphas[0] < 16 && alphas[1] < 16 && alphas[2] > 240 && alphas[3] > 240, `transparent corners, opaque subject (${alphas.join(', ')})`);
  t.match(await page.textContent('#credits'), /Credits charged: 1\b.*credits remaining: 9\b/);
  t.match(await page.textContent('#status'), /Done in .*background job/);
  t.notOk(requests.some((u) => u === `${srv.url}/api/v1/remove`), 'not sent to /remove');
  t.ok(requests.some((u) => u === `${srv.url}/api/v1/jobs`), 'POST /api/v1/jobs');
  t.ok(requests.some((u) => u.startsWith(`${srv.url}/api/v1/jobs/`)), 'then polled at GET /api/v1/jobs/{id}');
  t.same(problems, [], 'no script error or CSP violation');
  onlyOwnOrigin(t, srv, requests);
});

t.test('in Chromium: remove.bg\'s options from "More": a ZIP with a crop margin, then a background picture file with format auto', async (t) => {
  const srv = await startServe(t, ['--workers', '1']);
  const key = await createKey(srv.dataDir);
  const { page, problems, requests } = await openPage(t, srv);
  await page.fill('#key', key.key);
  await page.setInputFiles('#file', ASTRONAUT);
  await page.waitForFunction(() => /512×512/.test(document.getElementById('picked')?.textContent ?? ''));

  await page.check('#crop');
  await page.selectOption('#format', 'zip');
  await page.click('#more summary');
  await page.fill('#crop-margin', '10px');
  await page.click('#go');
  await page.waitForSelector('#download:not([hidden])', { timeout: 120_000 });
  t.equal(await page.getAttribute('#download', 'download'), 'astronaut.cutout.zip', 'a ZIP is offered for download');
  t.equal(await page.isHidden('#result'), true, 'not shown as an image');
  const [zip] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const bytes = await fs.readFile(await zip.path());
  t.equal(bytes.subarray(0, 2).toString('latin1'), 'PK', 'the download is a ZIP');
  t.ok(bytes.includes(Buffer.from('color.jpg')) && bytes.includes(Buffer.from('alpha.png')), 'holding color.jpg and alpha.png');

  await page.uncheck('#crop');
  await page.fill('#crop-margin', '');
  await page.selectOption('#format', 'auto');
  await page.setInputFiles('#bg-file', path.join(FIXTURES, 'coffee.jpg'));
  await page.fill('#scale', '50%');
  await page.click('#go');
  await page.waitForSelector('#result:not([hidden])', { timeout: 120_000 });
  t.equal(await page.getAttribute('#download', 'download'), 'astronaut.cutout.jpg', 'format auto over an opaque picture: a JPEG');
  const { width, height, alphas } = await resultAlphas(page, [[3, 3], [256, 256]]);
  t.same([width, height], [512, 512]);
  t.same(alphas, [255, 255], 'the picture fills the background: opaque everywhere');
  t.same(problems, [], 'no script error or CSP violation');
  onlyOwnOrigin(t, srv, requests);
});
