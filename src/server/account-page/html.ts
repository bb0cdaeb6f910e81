/**
 * The account page (`GET /account`): a customer's own account, for the key entered in it (kept in
 * this browser's localStorage under the playground's name, so a key entered in either page serves
 * both). No inline script or style (the CSP is the playground's); the script and the stylesheet are
 * served by cutout at /account/. Paths are relative, so the page also works behind a proxy that
 * mounts cutout under a prefix.
 */
export const ACCOUNT_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>cutout: your account</title>
<link rel="icon" href="playground/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="account/app.css">
<script src="account/app.js" defer></script>
</head>
<body>
<header class="top">
  <h1><img src="playground/icon.svg" alt="" width="28" height="28"> Your cutout account</h1>
  <p class="lede">Your balance, what you used each day and your recent removals on this server. <a href="./" id="playground-link">Open the playground</a> to remove a background.</p>
</header>
<main>
<form id="key-form" class="card key" novalidate>
  <label for="key">Your API key</label>
  <div class="key-row">
    <input id="key" name="api_key" type="password" autocomplete="off" spellcheck="false" placeholder="cut_live_..." aria-describedby="key-hint">
    <button id="show" class="go" type="submit">Show my account</button>
  </div>
  <p class="hint" id="key-hint">Kept in this browser's localStorage only (shared with the playground) and sent to this server as <code>Authorization: Bearer</code>.</p>
  <p class="error" id="error" role="alert" hidden></p>
</form>

<section class="card balance" aria-labelledby="balance-title">
  <h2 id="balance-title">Balance</h2>
  <p class="big"><span id="balance">–</span> <span class="unit">credits</span></p>
  <dl class="facts">
    <div><dt>Plan</dt><dd id="plan">–</dd></div>
    <div><dt>Used this month</dt><dd id="month-credits">–</dd></div>
    <div><dt>Removals, last 30 days</dt><dd id="removals-30">–</dd></div>
  </dl>
</section>

<section class="card usage" aria-labelledby="usage-title">
  <h2 id="usage-title">Usage per day</h2>
  <p class="hint">The last 30 days (UTC): removals per day, and the credits they cost.</p>
  <div id="chart" class="chart"><p class="empty" id="chart-empty">Enter your key to see your usage.</p></div>
  <p class="legend" id="legend" hidden><span class="swatch requests"></span> removals <span class="swatch credits"></span> credits</p>
</section>

<section class="card recent" aria-labelledby="recent-title">
  <h2 id="recent-title">Recent removals</h2>
  <table id="removals" hidden>
    <thead><tr><th scope="col" class="col-when">When</th><th scope="col" class="col-input">Input</th><th scope="col" class="col-size">Size</th><th scope="col" class="col-credits num">Credits</th><th scope="col" class="col-confidence num">Confidence</th></tr></thead>
    <tbody id="removals-body"></tbody>
  </table>
  <p class="empty" id="removals-empty">No removals to show yet.</p>
  <p class="hint">Confidence: how sure cutout is of the cut-out (100 % sure), shown while the result is kept.</p>
</section>
</main>
</body>
</html>
`;
