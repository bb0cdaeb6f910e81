/** The playground's stylesheet (served as /playground/app.css; the CSP forbids inline styles). */
export const PLAYGROUND_CSS = String.raw`:root {
  --fg: #111827; --muted: #4b5563; --bg: #f9fafb; --card: #ffffff; --line: #d1d5db;
  --accent: #4338ca; --accent-fg: #ffffff; --error-bg: #fef2f2; --error-fg: #991b1b; --focus: #f59e0b;
  --check-a: #e5e7eb; --check-b: #ffffff;
  color-scheme: light;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  line-height: 1.45;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); }
a { color: var(--accent); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; top: 0; background: var(--card); padding: 0.5rem; }
.skip:focus { left: 0.5rem; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.top { padding: 1rem 1.25rem 0; max-width: 80rem; margin: 0 auto; }
.top h1 { margin: 0; font-size: 1.5rem; display: flex; align-items: center; gap: 0.5rem; }
.lede { margin: 0.25rem 0 0; color: var(--muted); }
main {
  display: grid; grid-template-columns: minmax(17rem, 22rem) 1fr; gap: 1.25rem;
  padding: 1rem 1.25rem; max-width: 80rem; margin: 0 auto;
}
.controls { display: flex; flex-direction: column; gap: 0.75rem; min-width: 0; }
fieldset { margin: 0; border: 1px solid var(--line); border-radius: 0.5rem; background: var(--card); padding: 0.5rem 0.75rem 0.75rem; min-width: 0; }
legend { font-weight: 600; padding: 0 0.25rem; }
label { display: block; font-weight: 500; margin: 0.25rem 0; }
input[type=url], input[type=password], input[type=text], select {
  width: 100%; font: inherit; padding: 0.4rem 0.5rem; border: 1px solid #9ca3af; border-radius: 0.375rem; background: #fff; color: var(--fg);
}
input[type=color] { width: 3rem; height: 2rem; padding: 0; border: 1px solid #9ca3af; border-radius: 0.25rem; background: #fff; }
input[type=color]:disabled { opacity: 0.4; }
.row { display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem; margin: 0.35rem 0; }
.row > label { margin: 0; min-width: 5.5rem; }
.row > select { flex: 1 1 10rem; width: auto; min-width: 0; max-width: 100%; }
.row > input[type=text], .row > input[type=url] { flex: 1 1 10rem; width: auto; min-width: 0; max-width: 100%; }
.row > input[type=file] { flex: 1 1 10rem; min-width: 0; max-width: 100%; font: inherit; }
.more { margin-top: 0.35rem; }
.more > summary { cursor: pointer; font-weight: 500; padding: 0.2rem 0; }
.check { display: inline-flex; align-items: center; gap: 0.35rem; }
.check label { margin: 0; font-weight: 400; }
.check input { width: 1.1rem; height: 1.1rem; margin: 0; }
.hint { margin: 0.25rem 0; font-size: 0.85rem; color: var(--muted); }
.dropzone {
  border: 2px dashed #9ca3af; border-radius: 0.5rem; padding: 0.75rem; margin-bottom: 0.5rem; text-align: center;
  transition: background 0.15s, border-color 0.15s;
}
.dropzone.over { background: #eef2ff; border-color: var(--accent); }
.dropzone input[type=file] { width: 100%; max-width: 100%; font: inherit; }
.file-label { font-weight: 600; }
.picked { margin: 0.35rem 0 0; font-size: 0.9rem; word-break: break-all; }
.go {
  font: inherit; font-weight: 600; font-size: 1.05rem; padding: 0.7rem 1rem; border: 0; border-radius: 0.5rem;
  background: var(--accent); color: var(--accent-fg); cursor: pointer;
}
.go:hover { background: #3730a3; }
/* Always in reach at 1280x900 and below, however long the options grow (issue 42). */
.go { position: sticky; bottom: 0.75rem; z-index: 1; box-shadow: 0 0.25rem 0.75rem rgba(17, 24, 39, 0.25); }
.go:disabled { background: #6b7280; cursor: progress; }
.output { min-width: 0; display: flex; flex-direction: column; gap: 0.6rem; }
.progress progress { width: 100%; height: 0.6rem; }
.status { margin: 0; min-height: 1.45em; color: var(--muted); }
.error {
  background: var(--error-bg); color: var(--error-fg); border: 1px solid #fecaca; border-radius: 0.5rem;
  padding: 0.6rem 0.75rem; font-weight: 500; white-space: pre-wrap;
}
.compare { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0.75rem; }
.pane { margin: 0; min-width: 0; }
.pane figcaption { text-align: center; font-size: 0.9rem; color: var(--muted); margin-top: 0.25rem; }
.checker {
  display: flex; align-items: center; justify-content: center; min-height: 14rem; border: 1px solid var(--line); border-radius: 0.5rem;
  overflow: hidden; padding: 0.5rem;
  background-color: var(--check-b);
  background-image: conic-gradient(var(--check-a) 25%, var(--check-b) 0 50%, var(--check-a) 0 75%, var(--check-b) 0);
  background-size: 20px 20px;
}
.checker img { display: block; max-width: 100%; max-height: 60vh; height: auto; }
.checker .empty { color: var(--muted); background: rgba(255,255,255,0.85); padding: 0.25rem 0.5rem; border-radius: 0.25rem; text-align: center; }
.after { display: flex; flex-wrap: wrap; align-items: center; gap: 0.75rem 1.25rem; }
.download {
  display: inline-block; padding: 0.5rem 0.9rem; border: 2px solid var(--accent); border-radius: 0.5rem; font-weight: 600; text-decoration: none;
}
.download:hover { background: #eef2ff; }
.credits { margin: 0; font-weight: 500; }
.foot { max-width: 80rem; margin: 0 auto; padding: 0 1.25rem 1.5rem; color: var(--muted); font-size: 0.85rem; }
[hidden] { display: none !important; }
@media (max-width: 52rem) {
  main { grid-template-columns: minmax(0, 1fr); }
}
@media (max-width: 30rem) {
  .compare { grid-template-columns: minmax(0, 1fr); }
  .top h1 { font-size: 1.25rem; }
}
@media (prefers-reduced-motion: reduce) { * { transition: none !important; } }
`;
