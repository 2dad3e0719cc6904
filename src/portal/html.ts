/**
 * Portal pages are HTML made by a tagged template that escapes every value it is given
 * (@remix-run/html-template): markup comes only from the templates themselves, or from
 * other `html` values, never from a string.
 */
import { html, type SafeHtml } from '@remix-run/html-template'

export { html }
export type Html = SafeHtml

export interface PageOptions {
  readonly title: string
  /** The signed-in user's email, for the header; null on the sign-in pages. */
  readonly user?: string | null
  readonly body: Html
}

/** page wraps a page's body in the portal's layout: landmarks, a skip link, the one stylesheet and script. */
export function page({ title, user = null, body }: PageOptions): string {
  return String(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Tessera developer portal</title>
<link rel="stylesheet" href="/portal/assets/portal.css">
<meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}'>
<script src="/portal/assets/htmx.min.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header>
<p class="brand"><a href="/portal">Tessera developer portal</a></p>
${user === null ? '' : html`<p class="who">Signed in as ${user}</p>`}
</header>
<main id="main">
<h1>${title}</h1>
${body}
</main>
<footer><p><a href="/docs">API reference</a></p></footer>
</body>
</html>
`)
}
