/** The portal's own assets, served from the node (never a CDN): its stylesheet, its one small script, and htmx. */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

export const HTMX = readFileSync(require.resolve('htmx.org/dist/htmx.min.js'))

/**
 * PORTAL_JS: copy buttons. A `<button data-copy="ID" hidden>` copies the text of the element
 * ID; it is hidden until this script shows it, so that without scripts nothing is offered
 * that does not work (the value stays there to select by hand).
 */
export const PORTAL_JS = `"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent.trim()).then(function () {
        var status = document.getElementById(button.getAttribute("data-copy") + "-status");
        if (status) status.textContent = "Copied to the clipboard.";
      });
    });
  });
});
`

/** The stylesheet: contrast above WCAG AA (4.5:1) everywhere, visible focus, no layout that needs a script. */
export const PORTAL_CSS = `
:root { color-scheme: light; --ink: #1a1a1a; --muted: #4a4a4a; --line: #8a8a8a; --soft: #f2f4f7; --accent: #0b4f9c; --danger: #a4161a; --ok: #1e6b2e; --warn: #7a4d00; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 72rem; padding: 1rem 1.5rem 4rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .5rem; }
header { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: center; gap: 1rem; border-bottom: 1px solid var(--line); }
.brand a { font-weight: 700; text-decoration: none; }
.who { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem; }
.who p { margin: 0; color: var(--muted); }
ul.menu, ul.tabs { display: flex; flex-wrap: wrap; gap: 1rem; list-style: none; margin: 0; padding: 0; align-items: center; }
ul.tabs { margin: 1rem 0 0; border-bottom: 1px solid var(--line); gap: 0; }
ul.tabs a { display: block; padding: .5rem 1rem; text-decoration: none; }
ul.tabs a[aria-current="page"] { font-weight: 700; border-bottom: 3px solid var(--accent); }
form { display: grid; gap: .75rem; max-width: 30rem; }
form.inline { display: inline; }
form.row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; max-width: none; }
form.row > div { display: grid; gap: .25rem; }
label { font-weight: 600; }
input, select { font: inherit; padding: .45rem .5rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; color: var(--ink); }
fieldset { border: 1px solid var(--line); border-radius: 4px; }
button { font: inherit; padding: .5rem 1rem; border: 2px solid var(--accent); border-radius: 4px; background: var(--accent); color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: var(--accent); }
button.danger { background: var(--danger); border-color: var(--danger); }
button.link { background: none; border: 0; padding: 0; color: var(--accent); text-decoration: underline; }
.error { color: var(--danger); }
.notice { color: var(--ok); }
.hint { color: var(--muted); margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
caption { text-align: left; font-weight: 700; padding: .25rem 0; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: var(--soft); border-radius: 4px; }
code { padding: .1rem .3rem; }
pre { padding: .75rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
.secret { font-size: 1.1rem; padding: .5rem; border: 2px dashed var(--accent); word-break: break-all; }
.badge { display: inline-block; padding: 0 .4rem; border-radius: 4px; border: 1px solid currentColor; font-size: .9rem; }
.badge.ok { color: var(--ok); }
.badge.warn { color: var(--warn); }
.badge.off { color: var(--muted); }
.badge.bad { color: var(--danger); }
footer { margin-top: 3rem; border-top: 1px solid var(--line); }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
/* htmx's request indicators, here rather than injected by htmx (the CSP allows no inline style). */
.htmx-indicator { opacity: 0; }
.htmx-request .htmx-indicator, .htmx-request.htmx-indicator { opacity: 1; transition: opacity 200ms ease-in; }
`
