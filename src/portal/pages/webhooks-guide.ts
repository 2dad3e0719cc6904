/**
 * What a receiver of the account's webhooks needs to know, on the webhooks page itself: the
 * request (its headers and body), the events and their fields, and how to verify a signature,
 * with code for Node and for Python that uses their standard libraries only. The code is the
 * page's: test/http/portal/webhooks-guide.test.ts runs both against a real delivery.
 */
import { html, wide, type Html } from '../web/html.ts'
import { EVENT_TYPES, type EventType } from '../../domain/events.ts'

/** NODE_VERIFY: verification in Node, with node:crypto only. */
export const NODE_VERIFY = `import { createHmac, timingSafeEqual } from 'node:crypto'

// secret: the endpoint's signing secret (whsec_…); headers: the request's headers
// (lower-case names); body: the raw body as received (a string or a Buffer), before any JSON parsing.
export function verifyWebhook(secret, headers, body) {
  const id = headers['webhook-id']
  const timestamp = headers['webhook-timestamp']
  const signatures = headers['webhook-signature']
  if (!id || !timestamp || !signatures) return false
  // More than 5 minutes away from now: a replay, or a clock far off.
  if (!/^\\d+$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const expected = createHmac('sha256', key).update(\`\${id}.\${timestamp}.\`).update(body).digest()
  return signatures.split(' ').some((entry) => {
    const [version, signature = ''] = entry.split(',')
    const given = Buffer.from(signature, 'base64')
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected)
  })
}
`

/** PYTHON_VERIFY: verification in Python 3, with the standard library only. */
export const PYTHON_VERIFY = `import base64, binascii, hashlib, hmac, time

# secret: the endpoint's signing secret (whsec_...); headers: the request's headers
# (a dict with lower-case names); body: the raw body as received, in bytes.
def verify_webhook(secret: str, headers: dict, body: bytes) -> bool:
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not (msg_id and timestamp and signatures) or not timestamp.isdigit():
        return False
    # More than 5 minutes away from now: a replay, or a clock far off.
    if abs(time.time() - int(timestamp)) > 300:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    for entry in signatures.split(" "):
        version, _, signature = entry.partition(",")
        try:
            given = base64.b64decode(signature, validate=True)
        except binascii.Error:
            continue
        if version == "v1" and hmac.compare_digest(given, expected):
            return True
    return False
`

const EXAMPLE = `POST /your/endpoint HTTP/1.1
content-type: application/json
webhook-id: evt_0193581c2a5f0000a1b2c3
webhook-timestamp: 1795425700
webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=

{"type":"factor.activated","timestamp":"2026-11-23T09:21:40.118Z","data":{"userID":"42","factorID":"fct_0193581c2a5f0000d4e5f6"}}`

/** What each event says: one entry per type of the one list (domain/events.ts), so a new type cannot be left out of the page. */
const EVENTS = {
  'factor.created': 'A factor was created for a user (not yet confirmed by a first code).',
  'factor.activated': 'A factor was confirmed by its first code: it now guards sign-ins.',
  'factor.deleted': "A factor was deleted (by the API, or an operator's page).",
  'factor.verification_failed': 'A code given for a factor was wrong.',
  'factor.lockout_started': 'Too many wrong codes: the factor refuses every code until the lockout ends or is cleared.',
  'recovery_code.used': 'A recovery code was used in place of a code (it works once).',
  'recovery_codes.regenerated': "A user's recovery codes were made again: the old ones stop working.",
  'conversion.succeeded':
    'A conversion job ended with its result: data has jobID, operation, your metadata and result (its download url, size, type, name, pages, expiresAt).',
  'conversion.failed': 'A conversion job failed: data has jobID, operation, your metadata and error (its code and message).',
} as const satisfies Record<EventType, string>

/** webhooksGuide: the section of the webhooks page that tells a receiver what arrives and how to trust it. */
export function webhooksGuide(limits: { readonly timeoutMs: number; readonly retrySeconds: number }): Html {
  const retry = limits.retrySeconds % 3600 === 0 ? `${limits.retrySeconds / 3600} hours` : `${Math.round(limits.retrySeconds / 60)} minutes`
  return html`<h2 id="receiving">Receiving events</h2>
<p>Each event is a <code>POST</code> of JSON to each endpoint that takes its type, signed as the <a href="https://www.standardwebhooks.com/">Standard Webhooks</a> specification says. An endpoint answers 2xx within ${String(limits.timeoutMs / 1000)} seconds to take it; anything else (a redirect too) is retried with growing delays for ${retry}, then marked failed (each endpoint's deliveries page says why).</p>
<pre id="webhook-example">${EXAMPLE}</pre>
<dl class="facts">
<dt><code>webhook-id</code></dt><dd>The event's id: the same in every retry and re-send. Delivery is at least once, so keep the ids you have handled and drop a repeat.</dd>
<dt><code>webhook-timestamp</code></dt><dd>When this attempt was sent, in seconds since 1970 (the body's <code>timestamp</code> is when the event happened).</dd>
<dt><code>webhook-signature</code></dt><dd><code>v1,</code> then the base64 HMAC-SHA256 of <code>{webhook-id}.{webhook-timestamp}.{body}</code>, keyed with the base64-decoded part of the secret after <code>whsec_</code>. Several signatures may come, separated by spaces: one that matches is enough.</dd>
<dt>Body</dt><dd><code>type</code> (below), <code>timestamp</code> and <code>data</code>: the API's own field names (<code>userID</code>, <code>factorID</code>, <code>jobID</code>, …), never a secret, a code or a URL you gave.</dd>
</dl>
${wideEvents()}
<h3 id="verify">Verify each delivery</h3>
<p>Compute the signature over the <strong>raw body</strong>, before any JSON parsing (a parsed and re-serialised body no longer matches), compare in constant time, and refuse a timestamp more than 5 minutes away. Any Standard Webhooks library does this (<code>standardwebhooks</code> on npm and PyPI); these functions do it with the standard library alone.</p>
<h4>Node</h4>
<pre id="verify-node">${NODE_VERIFY}</pre>
<p><button type="button" class="secondary" data-copy="verify-node" hidden>Copy the Node code</button> <span role="status" id="verify-node-status"></span></p>
<h4>Python</h4>
<pre id="verify-python">${PYTHON_VERIFY}</pre>
<p><button type="button" class="secondary" data-copy="verify-python" hidden>Copy the Python code</button> <span role="status" id="verify-python-status"></span></p>`
}

function wideEvents(): Html {
  return wide(
    'Event types',
    html`<table>
<caption>Event types</caption>
<thead><tr><th scope="col">Type</th><th scope="col">When</th></tr></thead>
<tbody>${EVENT_TYPES.map((type) => [type, EVENTS[type]] as const).map(([type, words]) => html`<tr><th scope="row"><code class="id">${type}</code></th><td>${words}</td></tr>`)}</tbody>
</table>`,
  )
}
