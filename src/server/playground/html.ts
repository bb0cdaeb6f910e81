/**
 * The playground page. No inline script or style (the CSP forbids both); the script and the
 * stylesheet are served by cutout at /playground/. Paths are relative, so the page also works
 * behind a proxy that mounts cutout under a prefix.
 */
export const PLAYGROUND_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>cutout playground: remove an image background</title>
<link rel="icon" href="playground/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="playground/app.css">
<script src="playground/app.js" defer></script>
</head>
<body>
<a class="skip" href="#controls">Skip to the controls</a>
<header class="top">
  <h1><img src="playground/icon.svg" alt="" width="28" height="28"> cutout playground</h1>
  <p class="lede">Remove the background of a photo with this server's <a href="api/v1/openapi.json">v1 API</a>. Previews are free; a full-size result costs 1 credit.</p>
</header>
<main>
<form id="controls" class="controls" novalidate>
  <fieldset class="auth">
    <legend>API key</legend>
    <label for="key">Your API key</label>
    <input id="key" name="api_key" type="password" autocomplete="off" spellcheck="false" placeholder="cut_live_..." aria-describedby="key-hint">
    <p class="hint" id="key-hint">Kept in this browser's localStorage only and sent to this server as <code>Authorization: Bearer</code>. Create one with <code>cutout keys create</code>.</p>
  </fieldset>

  <fieldset class="source">
    <legend>Image</legend>
    <div id="dropzone" class="dropzone">
      <label for="file" class="file-label">Choose an image file</label>
      <input id="file" name="image_file" type="file" accept="image/png,image/jpeg,image/webp,image/gif,image/bmp,image/tiff,image/avif,image/heic,image/heif,.heic,.heif">
      <p class="hint" id="drop-hint">or drop it here, or paste it (Ctrl+V). JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC, up to 25 MB.</p>
      <p class="picked" id="picked" hidden></p>
    </div>
    <label for="url">or an image URL</label>
    <input id="url" name="image_url" type="url" inputmode="url" placeholder="https://example.com/photo.jpg" autocomplete="off" spellcheck="false">
  </fieldset>

  <fieldset class="options">
    <legend>Options</legend>
    <div class="row">
      <label for="size">Size</label>
      <select id="size" name="size" aria-describedby="size-hint">
        <option value="preview" selected>preview (free)</option>
        <option value="full">full (1 credit)</option>
        <option value="auto">auto</option>
      </select>
    </div>
    <p class="hint" id="size-hint">Preview: longest side 800 px, free. Full: native size, 1 credit. Auto: full up to 4 MP, else preview. Full size over 4 MP runs as a background job.</p>
    <div class="row">
      <label for="format">Format</label>
      <select id="format" name="format">
        <option value="png" selected>PNG</option>
        <option value="webp">WebP</option>
        <option value="jpg">JPG (no transparency)</option>
        <option value="auto">Auto: PNG with transparency, else JPG</option>
        <option value="zip">ZIP: color.jpg and alpha.png</option>
      </select>
    </div>
    <div class="row">
      <label for="bg">Background colour</label>
      <input id="bg" name="bg_color" type="color" value="#ffffff" disabled>
      <span class="check"><input id="transparent" type="checkbox" checked><label for="transparent">Transparent</label></span>
    </div>
    <p class="hint" id="jpg-hint" hidden>JPG has no transparency: a transparent background comes out white.</p>
    <div class="row">
      <span class="check"><input id="crop" name="crop" type="checkbox"><label for="crop">Crop to the subject</label></span>
    </div>
    <details class="more" id="more">
      <summary>More: margin, region, scale, position, background picture</summary>
      <div class="row">
        <label for="crop-margin">Crop margin</label>
        <input id="crop-margin" name="crop_margin" type="text" placeholder="20px, 10% or 10px 20px" autocomplete="off" spellcheck="false">
      </div>
      <div class="row">
        <label for="roi">Region</label>
        <input id="roi" name="roi" type="text" placeholder="x1 y1 x2 y2, e.g. 0% 0% 100% 80%" autocomplete="off" spellcheck="false">
      </div>
      <div class="row">
        <label for="scale">Scale</label>
        <input id="scale" name="scale" type="text" placeholder="80%, or original" autocomplete="off" spellcheck="false">
      </div>
      <div class="row">
        <label for="position">Position</label>
        <input id="position" name="position" type="text" placeholder="center, or 50% 100%" autocomplete="off" spellcheck="false">
      </div>
      <div class="row">
        <label for="bg-url">Background picture URL</label>
        <input id="bg-url" name="bg_image_url" type="url" inputmode="url" placeholder="https://example.com/beach.jpg" autocomplete="off" spellcheck="false">
      </div>
      <div class="row">
        <label for="bg-file">or a picture file</label>
        <input id="bg-file" name="bg_image_file" type="file" accept="image/png,image/jpeg,image/webp,image/gif,image/bmp,image/tiff">
      </div>
      <p class="hint" id="more-hint">remove.bg's options: the margin goes around a crop (Crop on); only the region may hold the subject; scale is the subject's share of the canvas, which position places. A picture replaces the background colour; a picture file works up to 4 MP at full size (larger images run as jobs, which take the picture by URL).</p>
    </details>
  </fieldset>

  <button id="go" type="submit" class="go">Remove background</button>
</form>

<section class="output" aria-labelledby="result-heading">
  <h2 id="result-heading" class="visually-hidden">Result</h2>
  <div id="progress-box" class="progress" hidden>
    <progress id="progress" aria-label="Working"></progress>
  </div>
  <p id="status" class="status" role="status" aria-live="polite"></p>
  <div id="error" class="error" role="alert" aria-live="assertive" hidden></div>
  <div class="compare">
    <figure class="pane">
      <div class="checker"><img id="original" alt="The original image" hidden><p class="empty" id="original-empty">The original appears here.</p></div>
      <figcaption>Original</figcaption>
    </figure>
    <figure class="pane">
      <div class="checker" id="result-box"><img id="result" alt="The cutout: the image with its background removed" hidden><p class="empty" id="result-empty">The cutout appears here.</p></div>
      <figcaption>Cutout<span id="confidence" class="confidence"></span></figcaption>
    </figure>
  </div>
  <div class="after">
    <a id="download" class="download" hidden>Download the cutout</a>
    <p id="credits" class="credits" aria-live="polite"></p>
  </div>
</section>
</main>
<footer class="foot"><p>Served by <code>cutout serve</code>. Turn this page off with <code>--no-playground</code>.</p></footer>
</body>
</html>
`;
