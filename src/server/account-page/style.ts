/** The account page's stylesheet (served as /account/app.css; the CSP forbids inline styles). */
export const ACCOUNT_CSS = String.raw`:root {
  --fg: #111827; --muted: #4b5563; --bg: #f9fafb; --card: #ffffff; --line: #d1d5db;
  --accent: #4338ca; --accent-soft: #c7d2fe; --accent-fg: #ffffff; --error-bg: #fef2f2; --error-fg: #991b1b; --focus: #f59e0b;
  color-scheme: light;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  line-height: 1.45;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); }
a { color: var(--accent); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.top { padding: 1rem 1.25rem 0; max-width: 72rem; margin: 0 auto; }
.top h1 { margin: 0; font-size: 1.5rem; display: flex; align-items: center; gap: 0.5rem; }
.lede { margin: 0.25rem 0 0; color: var(--muted); }
main {
  display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 2fr); gap: 1rem;
  padding: 1rem 1.25rem; max-width: 72rem; margin: 0 auto;
}
.card { background: var(--card); border: 1px solid var(--line); border-radius: 0.5rem; padding: 0.75rem 1rem; min-width: 0; }
.card h2 { margin: 0 0 0.5rem; font-size: 1.1rem; }
.key { grid-column: 1 / -1; }
.usage, .recent { grid-column: 2; }
.balance { grid-column: 1; grid-row: 2 / span 2; align-self: start; }
label { display: block; font-weight: 600; margin: 0 0 0.25rem; }
.key-row { display: flex; flex-wrap: wrap; gap: 0.5rem; }
.key-row input { flex: 1 1 14rem; min-width: 0; font: inherit; padding: 0.45rem 0.5rem; border: 1px solid #9ca3af; border-radius: 0.375rem; }
.go { font: inherit; font-weight: 600; padding: 0.45rem 1rem; border: 0; border-radius: 0.375rem; background: var(--accent); color: var(--accent-fg); cursor: pointer; }
.go:hover { background: #3730a3; }
.go:disabled { background: #6b7280; cursor: progress; }
.hint { margin: 0.35rem 0 0; font-size: 0.85rem; color: var(--muted); }
.error { margin: 0.5rem 0 0; padding: 0.5rem 0.75rem; border-radius: 0.375rem; background: var(--error-bg); color: var(--error-fg); }
.big { margin: 0; font-size: 2.5rem; font-weight: 700; line-height: 1.1; }
.big .unit { font-size: 1rem; font-weight: 500; color: var(--muted); }
.facts { margin: 0.75rem 0 0; display: grid; gap: 0.35rem; }
.facts div { display: flex; justify-content: space-between; gap: 0.5rem; border-top: 1px solid var(--line); padding-top: 0.35rem; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; font-weight: 600; }
.chart { width: 100%; }
.chart svg { display: block; width: 100%; height: auto; }
.chart .bar-requests { fill: var(--accent-soft); }
.chart .bar-credits { fill: var(--accent); }
.chart .axis { stroke: var(--line); stroke-width: 1; }
.chart text { fill: var(--muted); font-size: 11px; font-family: inherit; }
.legend { margin: 0.35rem 0 0; font-size: 0.85rem; color: var(--muted); }
.swatch { display: inline-block; width: 0.8rem; height: 0.8rem; border-radius: 0.15rem; vertical-align: -0.1rem; margin-left: 0.5rem; }
.swatch.requests { background: var(--accent-soft); }
.swatch.credits { background: var(--accent); }
.empty { margin: 0.5rem 0; color: var(--muted); }
table { width: 100%; border-collapse: collapse; table-layout: fixed; font-size: 0.9rem; }
th, td { text-align: left; padding: 0.35rem 0.4rem; border-bottom: 1px solid var(--line); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; }
th.col-when { width: 30%; }
th.col-size { width: 16%; }
th.col-credits { width: 14%; }
th.col-confidence { width: 22%; }
.confidence-low { color: var(--error-fg); font-weight: 600; }
@media (max-width: 44rem) {
  main { grid-template-columns: minmax(0, 1fr); padding: 0.75rem; }
  .usage, .recent, .balance, .key { grid-column: 1; grid-row: auto; }
  .top { padding: 0.75rem 0.75rem 0; }
  .top h1 { font-size: 1.25rem; }
  table { font-size: 0.8rem; }
  th, td { padding: 0.3rem 0.2rem; }
  .col-input { display: none; }
  th.col-when { width: 33%; }
  th.col-size { width: 21%; }
  th.col-credits { width: 18%; }
  th.col-confidence { width: 28%; }
}
`;
