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
:root {
  color-scheme: light;
  --ink: #1a1a1a; --muted: #4a4a4a; --line: #8a8a8a; --rule: #d0d5dd; --soft: #f2f4f7; --accent: #0b4f9c;
  /* The four states, everywhere: active / ok, pending / warning, failing / revoked, off. Text on its tint is above 4.5:1. */
  --ok: #1e6b2e; --ok-tint: #e8f3ea; --warn: #7a4d00; --warn-tint: #fdf3e1; --danger: #a4161a; --danger-tint: #fbe9e9;
  /* One type scale (a major third) and one spacing scale. */
  --step--1: .875rem; --step-0: 1rem; --step-1: 1.25rem; --step-2: 1.5rem; --step-3: 2rem;
  --space-1: .5rem; --space-2: .75rem; --space-3: 1rem; --space-4: 1.5rem; --space-5: 2.5rem;
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 72rem; padding: 1rem 1.5rem 4rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff; }
a { color: var(--accent); }
h1 { font-size: var(--step-3); line-height: 1.2; margin: var(--space-4) 0 var(--space-3); }
h2 { font-size: var(--step-2); line-height: 1.25; margin: var(--space-5) 0 var(--space-2); }
h3 { font-size: var(--step-1); line-height: 1.3; margin: var(--space-4) 0 var(--space-1); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .5rem; }
header { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: center; gap: 1rem; border-bottom: 1px solid var(--line); }
.brand a { font-weight: 700; text-decoration: none; display: inline-flex; align-items: center; gap: .5rem; font-size: var(--step-1); }
.brand img { width: 1.75rem; height: 1.75rem; }
.account-bar { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: center; gap: var(--space-1) var(--space-3); margin-top: var(--space-3); }
.account-name { margin: 0; font-size: var(--step-1); overflow-wrap: anywhere; }
.eyebrow { display: block; font-size: var(--step--1); text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
.switcher { position: relative; }
.switcher summary { cursor: pointer; padding: .4rem .75rem; border: 1px solid var(--line); border-radius: 4px; }
.switcher ul { position: absolute; right: 0; z-index: 10; min-width: 14rem; max-width: calc(100vw - 2rem); margin: .25rem 0 0; padding: .5rem 0; list-style: none; background: #fff; border: 1px solid var(--line); border-radius: 4px; box-shadow: 0 4px 12px rgb(0 0 0 / 15%); }
.switcher li a { display: block; padding: .4rem 1rem; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; position: relative; }
.id { white-space: nowrap; }
.who { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem; }
.who p { margin: 0; color: var(--muted); }
ul.menu, ul.tabs { display: flex; flex-wrap: wrap; gap: 1rem; list-style: none; margin: 0; padding: 0; align-items: center; }
ul.tabs { margin: 1rem 0 0; border-bottom: 1px solid var(--line); gap: 0; }
ul.tabs a { display: block; padding: .5rem 1rem; text-decoration: none; }
ul.tabs a[aria-current="page"] { font-weight: 700; border-bottom: 3px solid var(--accent); }
form { display: grid; gap: .75rem; max-width: 30rem; }
form > * { min-width: 0; }
form.inline { display: inline; }
form.row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; max-width: none; }
form.row > div { display: grid; gap: .25rem; }
label { font-weight: 600; }
input, select { max-width: 100%; font: inherit; padding: .45rem .5rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; color: var(--ink); }
fieldset { border: 1px solid var(--line); border-radius: 4px; min-width: 0; }
button { font: inherit; padding: .5rem 1rem; border: 2px solid var(--accent); border-radius: 4px; background: var(--accent); color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: var(--accent); }
button.danger { background: var(--danger); border-color: var(--danger); }
button.link { background: none; border: 0; padding: 0; color: var(--accent); text-decoration: underline; }
.error { color: var(--danger); }
.notice { color: var(--ok); }
.hint { color: var(--muted); margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
caption { text-align: left; font-weight: 700; padding: .25rem 0; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--rule); vertical-align: top; }
thead th { border-bottom: 2px solid var(--line); font-size: var(--step--1); text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: var(--soft); border-radius: 4px; }
code { padding: .1rem .3rem; }
pre { padding: .75rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
.secret { font-size: 1.1rem; padding: .5rem; border: 2px dashed var(--accent); word-break: break-all; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; border: 1px solid currentColor; font-size: var(--step--1); font-weight: 600; white-space: nowrap; }
.badge.ok { color: var(--ok); background: var(--ok-tint); }
.badge.warn { color: var(--warn); background: var(--warn-tint); }
.badge.off { color: var(--muted); background: var(--soft); }
.badge.bad { color: var(--danger); background: var(--danger-tint); }
footer { margin-top: var(--space-5); border-top: 1px solid var(--rule); }
@media (max-width: 40rem) {
  body { padding: .75rem 1rem 3rem; }
  ul.tabs a { padding: .4rem .6rem; }
}
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
/* htmx's request indicators, here rather than injected by htmx (the CSP allows no inline style). */
.htmx-indicator { opacity: 0; }
.htmx-request .htmx-indicator, .htmx-request.htmx-indicator { opacity: 1; transition: opacity 200ms ease-in; }
`
