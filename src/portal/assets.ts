/** The portal's own assets, served from the node (never a CDN): its stylesheet and htmx. */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

export const HTMX = readFileSync(require.resolve('htmx.org/dist/htmx.min.js'))

/** The stylesheet: contrast above WCAG AA (4.5:1) everywhere, visible focus, no layout that needs a script. */
export const PORTAL_CSS = `
:root { color-scheme: light; --ink: #1a1a1a; --muted: #4a4a4a; --line: #8a8a8a; --accent: #0b4f9c; --danger: #a4161a; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 60rem; padding: 1rem 1.5rem 4rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .5rem; }
header { display: flex; justify-content: space-between; border-bottom: 1px solid var(--line); }
.brand a { font-weight: 700; text-decoration: none; }
form { display: grid; gap: .75rem; max-width: 26rem; }
label { font-weight: 600; }
input { font: inherit; padding: .45rem .5rem; border: 1px solid var(--line); border-radius: 4px; }
button { font: inherit; padding: .5rem 1rem; border: 0; border-radius: 4px; background: var(--accent); color: #fff; cursor: pointer; }
.error { color: var(--danger); }
footer { margin-top: 3rem; border-top: 1px solid var(--line); }
/* htmx's request indicators, here rather than injected by htmx (the CSP allows no inline style). */
.htmx-indicator { opacity: 0; }
.htmx-request .htmx-indicator, .htmx-request.htmx-indicator { opacity: 1; transition: opacity 200ms ease-in; }
`
