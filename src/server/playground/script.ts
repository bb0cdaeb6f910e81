/**
 * The playground's script (served as /playground/app.js; the CSP forbids inline script). Plain
 * browser JavaScript kept as a string so tsc ships it in dist with no bundler. It uses only the
 * public v1 API, with relative URLs: POST api/v1/remove (sync), POST api/v1/jobs and
 * GET api/v1/jobs/{id} (full size over 4 MP, polled), GET api/v1/results/{id} (the image).
 * Written without backticks or dollar-brace so it can live in this template literal.
 */
export const PLAYGROUND_JS = String.raw`(function () {
  'use strict';

  var KEY_STORAGE = 'cutout.playground.apiKey';
  /** api-spec 4.1: /remove refuses size=full over 4 MP; those go through /jobs. */
  var MAX_SYNC_FULL_PIXELS = 4000000;
  var POLL_FIRST_MS = 600;
  var POLL_MAX_MS = 3000;
  var JOB_GIVE_UP_MS = 15 * 60 * 1000;

  function $(id) { return document.getElementById(id); }
  var els = {
    form: $('controls'), file: $('file'), dropzone: $('dropzone'), picked: $('picked'), url: $('url'),
    size: $('size'), format: $('format'), bg: $('bg'), transparent: $('transparent'), jpgHint: $('jpg-hint'),
    crop: $('crop'), key: $('key'), go: $('go'),
    cropMargin: $('crop-margin'), roi: $('roi'), scale: $('scale'), position: $('position'), bgUrl: $('bg-url'), bgFile: $('bg-file'),
    progressBox: $('progress-box'), progress: $('progress'), status: $('status'), error: $('error'),
    original: $('original'), originalEmpty: $('original-empty'), result: $('result'), resultEmpty: $('result-empty'),
    download: $('download'), credits: $('credits'), confidence: $('confidence'), output: document.querySelector('.output')
  };

  var state = { file: null, fileUrl: null, dims: null, resultUrl: null, busy: false, tick: null };

  // ---- API key: localStorage only ----
  function loadKey() {
    try { return window.localStorage.getItem(KEY_STORAGE) || ''; } catch (e) { return ''; }
  }
  function saveKey(value) {
    try {
      if (value) window.localStorage.setItem(KEY_STORAGE, value);
      else window.localStorage.removeItem(KEY_STORAGE);
    } catch (e) { /* storage disabled: the key lives in the field only */ }
  }
  els.key.value = loadKey();
  els.key.addEventListener('input', function () { saveKey(els.key.value.trim()); });

  // ---- messages ----
  function setStatus(text) { els.status.textContent = text; }
  function showError(text) {
    els.error.textContent = text;
    els.error.hidden = false;
  }
  function clearError() {
    els.error.textContent = '';
    els.error.hidden = true;
  }

  function setBusy(busy) {
    state.busy = busy;
    els.go.setAttribute('aria-disabled', busy ? 'true' : 'false');
    els.go.textContent = busy ? 'Working\u2026' : 'Remove background';
    els.go.disabled = false; // stays focusable; clicks are ignored while busy
    els.output.setAttribute('aria-busy', busy ? 'true' : 'false');
    els.progressBox.hidden = !busy;
    if (!busy && state.tick) { clearInterval(state.tick); state.tick = null; }
  }

  function formatBytes(n) {
    if (n < 1024) return n + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(0) + ' KB';
    return (n / 1024 / 1024).toFixed(1) + ' MB';
  }
  function seconds(ms) { return (ms / 1000).toFixed(1) + ' s'; }

  // ---- the image source: a file (picked, dropped, pasted) or a URL ----
  function clearResult() {
    if (state.resultUrl) URL.revokeObjectURL(state.resultUrl);
    state.resultUrl = null;
    els.result.hidden = true;
    els.result.removeAttribute('src');
    els.resultEmpty.textContent = 'The cutout appears here.';
    els.resultEmpty.hidden = false;
    els.download.hidden = true;
    els.download.removeAttribute('href');
    els.credits.textContent = '';
    els.confidence.textContent = '';
  }

  function setFile(file) {
    if (state.fileUrl) URL.revokeObjectURL(state.fileUrl);
    state.file = file;
    state.fileUrl = null;
    state.dims = null;
    clearError();
    clearResult();
    if (!file) {
      els.picked.hidden = true;
      els.original.hidden = true;
      els.original.removeAttribute('src');
      els.originalEmpty.textContent = 'The original appears here.';
      els.originalEmpty.hidden = false;
      return;
    }
    els.url.value = '';
    els.picked.textContent = file.name + ' (' + formatBytes(file.size) + ')';
    els.picked.hidden = false;
    state.fileUrl = URL.createObjectURL(file);
    var img = els.original;
    img.onload = function () {
      if (state.file !== file) return;
      state.dims = { w: img.naturalWidth, h: img.naturalHeight };
      els.picked.textContent = file.name + ' (' + formatBytes(file.size) + ', ' + img.naturalWidth + '\u00d7' + img.naturalHeight + ')';
    };
    img.onerror = function () {
      if (state.file !== file) return;
      img.hidden = true;
      els.originalEmpty.textContent = 'This browser cannot show this file; the server may still read it.';
      els.originalEmpty.hidden = false;
    };
    img.src = state.fileUrl;
    img.hidden = false;
    els.originalEmpty.hidden = true;
  }

  els.file.addEventListener('change', function () {
    setFile(els.file.files && els.file.files[0] ? els.file.files[0] : null);
  });

  els.url.addEventListener('input', function () {
    if (els.url.value.trim() === '') {
      if (!state.file) setFile(null);
      return;
    }
    if (state.file) {
      setFile(null);
      els.file.value = '';
    }
    els.original.hidden = true;
    els.originalEmpty.textContent = 'The server downloads this URL. This page shows images from this server only, so the original is not shown.';
    els.originalEmpty.hidden = false;
  });

  function takeFiles(files) {
    if (!files || files.length === 0) return false;
    var file = files[0];
    if (file.type && file.type.indexOf('image/') !== 0) {
      showError('That is not an image file (' + (file.type || 'unknown type') + '). Use a JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC image.');
      return true;
    }
    try {
      var dt = new DataTransfer();
      dt.items.add(file);
      els.file.files = dt.files;
    } catch (e) { els.file.value = ''; }
    setFile(file);
    return true;
  }

  ['dragenter', 'dragover'].forEach(function (type) {
    els.dropzone.addEventListener(type, function (e) {
      e.preventDefault();
      els.dropzone.classList.add('over');
    });
  });
  ['dragleave', 'dragend'].forEach(function (type) {
    els.dropzone.addEventListener(type, function () { els.dropzone.classList.remove('over'); });
  });
  els.dropzone.addEventListener('drop', function (e) {
    e.preventDefault();
    els.dropzone.classList.remove('over');
    var dt = e.dataTransfer;
    if (!dt) return;
    if (takeFiles(dt.files)) return;
    var text = (dt.getData('text/uri-list') || dt.getData('text/plain') || '').split('\n')[0].trim();
    if (/^https?:\/\//i.test(text)) {
      els.url.value = text;
      els.url.dispatchEvent(new Event('input'));
    }
  });
  // A file dropped next to the zone must not navigate away from the page.
  document.addEventListener('dragover', function (e) { e.preventDefault(); });
  document.addEventListener('drop', function (e) { e.preventDefault(); });

  document.addEventListener('paste', function (e) {
    var cd = e.clipboardData;
    if (!cd) return;
    if (cd.files && cd.files.length > 0) {
      e.preventDefault();
      takeFiles(cd.files);
      return;
    }
    var target = e.target;
    var inField = target && (target.tagName === 'INPUT' || target.tagName === 'TEXTAREA');
    var text = (cd.getData('text/plain') || '').trim();
    if (!inField && /^https?:\/\/\S+$/i.test(text)) {
      e.preventDefault();
      els.url.value = text;
      els.url.dispatchEvent(new Event('input'));
    }
  });

  // ---- options ----
  function syncOptions() {
    els.bg.disabled = els.transparent.checked;
    els.jpgHint.hidden = !(els.format.value === 'jpg' && els.transparent.checked);
  }
  els.transparent.addEventListener('change', syncOptions);
  els.format.addEventListener('change', syncOptions);
  syncOptions();

  // ---- talking to the API ----
  function ApiError(message) { this.message = message; }

  async function readJson(res) {
    var text = await res.text();
    if (!text) return null;
    try { return JSON.parse(text); } catch (e) { return null; }
  }

  /** The API's own words: error.message of api-spec part 7, or the msgs of the 422 detail shape. */
  function messageOf(res, body) {
    var msg = '';
    if (body && body.error && typeof body.error.message === 'string') msg = body.error.message;
    else if (body && Array.isArray(body.detail)) msg = body.detail.map(function (d) { return d && d.msg ? d.msg : ''; }).filter(Boolean).join(' ');
    if (!msg) msg = 'The server answered HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '') + '.';
    var retry = res.headers.get('Retry-After');
    if (retry && (res.status === 429 || res.status === 503)) msg += ' Try again in ' + retry + ' s.';
    return msg;
  }

  async function call(path, init) {
    try {
      return await fetch(path, init);
    } catch (e) {
      throw new ApiError('Could not reach the server (' + (e && e.message ? e.message : 'network error') + '). Is cutout serve still running?');
    }
  }

  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  /** The result URL as the API gave it, fetched from this page's origin when it names another one. */
  function sameOrigin(url) {
    var u = new URL(url, document.baseURI);
    if (u.origin === window.location.origin) return u.href;
    var m = /\/api\/v1\/results\/[^/?#]+$/.exec(u.pathname);
    return m ? new URL(m[0].slice(1), document.baseURI).href : u.href;
  }

  /** The file extension of what the server sent (format auto answers PNG or JPEG). */
  function extensionOf(contentType, format) {
    if (/zip/.test(contentType)) return 'zip';
    if (/jpeg/.test(contentType)) return 'jpg';
    if (/png/.test(contentType)) return 'png';
    if (/webp/.test(contentType)) return 'webp';
    return format === 'auto' ? 'png' : format;
  }

  function downloadName(extension) {
    var base = 'image';
    if (state.file && state.file.name) base = state.file.name.replace(/\.[^.]*$/, '') || 'image';
    else if (els.url.value) {
      try {
        var last = new URL(els.url.value).pathname.split('/').pop() || '';
        base = last.replace(/\.[^.]*$/, '') || 'image';
      } catch (e) { /* keep image */ }
    }
    return base + '.cutout.' + extension;
  }

  async function showResult(info, format, started) {
    setStatus('Downloading the result\u2026');
    var res = await call(sameOrigin(info.url));
    if (!res.ok) throw new ApiError(messageOf(res, await readJson(res)));
    var blob = await res.blob();
    var extension = extensionOf(blob.type || res.headers.get('Content-Type') || '', format);
    clearResult();
    state.resultUrl = URL.createObjectURL(blob);
    if (extension === 'zip') {
      // A ZIP (color.jpg and alpha.png) is not an image this page can show: it is offered for download.
      els.resultEmpty.textContent = 'A ZIP of color.jpg and alpha.png: download it below.';
      els.download.href = state.resultUrl;
      els.download.download = downloadName('zip');
      els.download.textContent = 'Download the result (ZIP, ' + formatBytes(blob.size) + ')';
      els.download.hidden = false;
      finish(info, started);
      return;
    }
    var img = els.result;
    img.src = state.resultUrl;
    try { await img.decode(); } catch (e) { throw new ApiError('The result could not be shown by this browser; download it instead.'); }
    img.hidden = false;
    els.resultEmpty.hidden = true;
    els.download.href = state.resultUrl;
    els.download.download = downloadName(extension);
    els.download.textContent = 'Download the cutout (' + extension.toUpperCase() + ', ' + img.naturalWidth + '\u00d7' + img.naturalHeight + ', ' + formatBytes(blob.size) + ')';
    els.download.hidden = false;
    finish(info, started);
  }

  function finish(info, started) {
    els.credits.textContent = 'Credits charged: ' + info.charged + ' \u00b7 credits remaining: ' + info.remaining;
    // The result's confidence (1: sure): low ones are those worth a second look.
    if (typeof info.confidence === 'number') {
      els.confidence.textContent = ' \u00b7 confidence ' + info.confidence.toFixed(2) + (info.confidence < 0.5 ? ' (worth a second look)' : '');
    }
    var took = seconds(performance.now() - started);
    setStatus('Done in ' + took + (info.job ? ' (background job ' + info.job + ')' : '') + '.');
  }

  async function runSync(key, form, format, started) {
    setStatus('Uploading and removing the background\u2026');
    var res = await call('api/v1/remove', { method: 'POST', headers: { Authorization: 'Bearer ' + key, Accept: 'application/json' }, body: form });
    var body = await readJson(res);
    if (!res.ok) throw new ApiError(messageOf(res, body));
    if (!body || typeof body.url !== 'string') throw new ApiError('The server answered without a result URL.');
    var confidence = res.headers.get('X-Cutout-Confidence');
    await showResult({ url: body.url, charged: body.credits_charged, remaining: body.credits_remaining, confidence: confidence === null ? undefined : Number(confidence) }, format, started);
  }

  async function runJob(key, form, format, started) {
    setStatus('Uploading the image for a background job\u2026');
    var auth = { Authorization: 'Bearer ' + key, Accept: 'application/json' };
    var res = await call('api/v1/jobs', { method: 'POST', headers: auth, body: form });
    var body = await readJson(res);
    if (!res.ok) throw new ApiError(messageOf(res, body));
    if (!body || typeof body.job_id !== 'string') throw new ApiError('The server accepted the job but gave no job_id.');
    var id = body.job_id;
    var status = body.status || 'queued';
    var describe = function () {
      var words = status === 'processing' ? 'Processing' : status === 'queued' ? 'Queued, waiting for a worker' : status;
      setStatus('Large image: background job ' + id.slice(0, 8) + '\u2026 ' + words + ' (' + seconds(performance.now() - started) + ')');
    };
    describe();
    state.tick = setInterval(describe, 1000);
    var wait = POLL_FIRST_MS;
    for (;;) {
      if (performance.now() - started > JOB_GIVE_UP_MS) throw new ApiError('The job is still running after 15 minutes; this page stopped waiting. Its id is ' + id + '.');
      await sleep(wait);
      wait = Math.min(POLL_MAX_MS, Math.round(wait * 1.5));
      var r = await call('api/v1/jobs/' + encodeURIComponent(id), { headers: auth });
      var job = await readJson(r);
      if (r.status === 429) {
        var after = Number(r.headers.get('Retry-After')) || 5;
        wait = Math.max(wait, after * 1000);
        continue;
      }
      if (!r.ok) throw new ApiError(messageOf(r, job));
      // A pending job's Retry-After says how often to poll (docs/http-api.md): never faster.
      wait = Math.max(wait, (Number(r.headers.get('Retry-After')) || 0) * 1000);
      status = (job && job.status) || status;
      describe();
      if (status === 'done') {
        clearInterval(state.tick);
        state.tick = null;
        await showResult({ url: job.url, charged: job.credits_charged, remaining: job.credits_remaining, confidence: job.confidence, job: id }, format, started);
        return;
      }
      if (status === 'failed') {
        var why = job && job.error && job.error.message ? job.error.message : 'The job failed.';
        throw new ApiError(why + ' Nothing was charged.');
      }
    }
  }

  els.form.addEventListener('submit', async function (e) {
    e.preventDefault();
    if (state.busy) return;
    clearError();
    var key = els.key.value.trim();
    var url = els.url.value.trim();
    if (!key) {
      showError('Enter your API key first. The server operator creates one with: cutout keys create');
      els.key.focus();
      return;
    }
    if (!state.file && !url) {
      showError('Choose an image file, drop one on the page, or give an image URL.');
      els.file.focus();
      return;
    }
    if (!state.file && !/^https?:\/\/\S+$/i.test(url)) {
      showError('The image URL must start with http:// or https://.');
      els.url.focus();
      return;
    }
    var size = els.size.value;
    var format = els.format.value;
    var form = new FormData();
    if (state.file) form.append('image_file', state.file, state.file.name || 'image');
    else form.append('image_url', url);
    form.append('size', size);
    form.append('format', format);
    var bgFile = els.bgFile.files && els.bgFile.files[0] ? els.bgFile.files[0] : null;
    var bgUrl = els.bgUrl.value.trim();
    // A background picture replaces the colour; the server says so if both kinds of picture are given.
    if (bgFile) form.append('bg_image_file', bgFile, bgFile.name || 'background');
    if (bgUrl) form.append('bg_image_url', bgUrl);
    if (!bgFile && !bgUrl) form.append('bg_color', els.transparent.checked ? 'transparent' : els.bg.value.replace(/^#/, ''));
    form.append('crop', els.crop.checked ? 'true' : 'false');
    [['crop_margin', els.cropMargin], ['roi', els.roi], ['scale', els.scale], ['position', els.position]].forEach(function (pair) {
      var value = pair[1].value.trim();
      if (value) form.append(pair[0], value);
    });
    // Full size over 4 MP (or of unknown size) goes through /jobs, which has no 4 MP limit.
    var small = state.file && state.dims && state.dims.w * state.dims.h <= MAX_SYNC_FULL_PIXELS;
    var useJob = size === 'full' && !small;

    setBusy(true);
    var started = performance.now();
    try {
      if (useJob) await runJob(key, form, format, started);
      else await runSync(key, form, format, started);
    } catch (err) {
      setStatus('');
      showError(err instanceof ApiError ? err.message : 'Something went wrong in this page: ' + (err && err.message ? err.message : String(err)));
    } finally {
      setBusy(false);
    }
  });
})();
`;
