/**
 * A small relying party for the passkey tests: a customer's site as it would use Tessera. It
 * serves one page (its script calls navigator.credentials with the options Tessera answered,
 * parsed by PublicKeyCredential.parseCreationOptionsFromJSON / parseRequestOptionsFromJSON,
 * and sends back PublicKeyCredential.toJSON()), and forwards the page's calls under /api/ to
 * Tessera with its API key, which never reaches the browser. Open it as http://localhost:PORT:
 * the relying party's ID is then `localhost`, and its origin the one the account allows.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Relying party</title></head>
<body><h1>Acme sign-in</h1>
<script>
const at = (user, rest) => '/api/totp/users/' + encodeURIComponent(user) + rest
async function call(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}) })
  return { status: r.status, body: await r.json() }
}
/** register: options, navigator.credentials.create, then the answer; or where it stopped. */
window.register = async (user, ask, label) => {
  const o = await call(at(user, '/passkeys/registration/options'), ask)
  if (o.status !== 200) return { step: 'options', ...o }
  let credential
  try {
    credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(o.body.options) })
  } catch (e) {
    return { step: 'browser', error: e.name }
  }
  return call(at(user, '/passkeys/registration'), { credential: credential.toJSON(), ...(label ? { label } : {}) })
}
/** assertion: options and navigator.credentials.get, the answer not sent (a test sends it, or keeps it to replay). */
window.assertion = async (user, ask) => {
  const o = await call(at(user, '/passkeys/authentication/options'), ask)
  if (o.status !== 200) return { step: 'options', ...o }
  try {
    const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.body.options) })
    return { credential: credential.toJSON() }
  } catch (e) {
    return { step: 'browser', error: e.name }
  }
}
window.signIn = (user, credential) => call(at(user, '/passkeys/authentication'), { credential })
</script></body></html>`

export interface RelyingPartySite {
  readonly port: number
  /** The page's origin, as the browser sends it: http://localhost:PORT. */
  readonly origin: string
  close(): Promise<void>
}

/** relyingParty serves the page and forwards /api/… to `tessera` with `apiKey`. */
export async function relyingParty(tessera: string, apiKey: string): Promise<RelyingPartySite> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      if (req.method === 'GET' && req.url === '/') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE)
        return
      }
      if (req.method !== 'POST' || !req.url?.startsWith('/api/')) {
        res.writeHead(404).end()
        return
      }
      const answer = await fetch(tessera + req.url.slice('/api'.length), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: Buffer.concat(chunks),
      })
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await answer.arrayBuffer()))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    port,
    origin: `http://localhost:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}
