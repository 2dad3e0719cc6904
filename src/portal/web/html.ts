/**
 * Portal pages are HTML made by a tagged template that escapes every value it is given
 * (@remix-run/html-template): markup comes only from the templates themselves, or from
 * other `html` values, never from a string.
 */
import { html, type SafeHtml } from '@remix-run/html-template'

export { html }
export type Html = SafeHtml

/**
 * wide: a table that may be wider than a phone, in a scroller of its own (a labelled region a
 * keyboard can focus and scroll), so that the page itself never scrolls sideways.
 */
export function wide(label: string, table: Html): Html {
  return html`<div class="scroll" role="region" aria-label="${label}" tabindex="0">${table}</div>`
}

export interface PageUser {
  readonly email: string
  readonly operator: boolean
  /** The session's CSRF token, for the sign-out form in the header. */
  readonly csrf: string
}

export interface PageOptions {
  readonly title: string
  /** The signed-in user, for the header's menu; null on the sign-in pages. */
  readonly user?: PageUser | null
  /** An account's navigation, on its pages. */
  readonly nav?: Html | null
  readonly body: Html
}

const userMenu = (user: PageUser) => html`<nav aria-label="Your portal" class="who">
<p>Signed in as ${user.email}</p>
<ul class="menu">
<li><a href="/portal/home">Your accounts</a></li>
<li><a href="/portal/security">Security</a></li>
${user.operator ? html`<li><a href="/portal/operator">Operator</a></li>` : ''}
<li><form method="post" action="/portal/sign-out" class="inline"><input type="hidden" name="_csrf" value="${user.csrf}"><button type="submit" class="link">Sign out</button></form></li>
</ul>
</nav>`

/** page wraps a page's body in the portal's layout: landmarks, a skip link, the one stylesheet and script. */
export function page({ title, user = null, nav = null, body }: PageOptions): string {
  return String(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Tessera developer portal</title>
<link rel="icon" href="/portal/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/portal/assets/portal.css">
<meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}'>
<script src="/portal/assets/htmx.min.js" defer></script>
<script src="/portal/assets/portal.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header>
<p class="brand"><a href="/portal/"><img src="/portal/assets/icon.svg" alt="">Tessera developer portal</a></p>
${user === null ? '' : userMenu(user)}
</header>
${nav ?? ''}
<main id="main">
<h1>${title}</h1>
${body}
</main>
<footer><p><a href="/docs">API reference</a></p></footer>
</body>
</html>
`)
}
