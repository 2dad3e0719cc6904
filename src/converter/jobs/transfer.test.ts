/**
 * The job transfers against real HTTP servers on 127.0.0.1 (and an HTTPS one with a
 * certificate the test makes): exact bytes in shared memory, filenames, redirects counted and
 * checked again, the size cap and the deadline, what the SSRF rules refuse never connected to,
 * and uploads that announce their size and pull their chunks only as the connection takes them.
 * A redirect from a public host to a private one cannot come from a real server here (it would
 * have to be public), so that re-check runs the real fetch loop with a stand-in for the one
 * request of each hop (fetchSourceVia).
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import http, { type IncomingHttpHeaders } from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import type { Lookup } from '../../webhooks/address.ts'
import { VERSION } from '../../version.ts'
import { fetchSource, fetchSourceVia, putResult, type Exchange, type Outgoing, type ResultBody, type TransferRefusal } from './transfer.ts'

const SECRET = 'X-Amz-Signature=SECRET42&X-Amz-Credential=SECRET42'
const LOCAL = { timeoutMs: 3000, maxBytes: 1024 * 1024, allowPrivate: true }
// A transfer that misses its own deadline fails its test instead of hanging the file.
const BOUNDED = { timeout: 20_000 }

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
}

/** serve: a server on 127.0.0.1 that records every request and counts every connection. */
async function serve(t: TestContext, handler: http.RequestListener, tls?: { key: string; cert: string }) {
  const server = tls === undefined ? http.createServer(handler) : https.createServer(tls, handler)
  const seen: Seen[] = []
  let connections = 0
  server.prependListener('request', (req: http.IncomingMessage) => seen.push({ method: req.method!, url: req.url!, headers: req.headers }))
  server.on(tls === undefined ? 'connection' : 'secureConnection', () => connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return { port: (server.address() as AddressInfo).port, seen, connections: () => connections }
}

const noSecret = (detail: string | null) => assert.doesNotMatch(String(detail), /SECRET42|Signature|Credential/, 'no query in a detail')

/** refusalOf: the detail of `result`, asserted to be a refusal of `reason` that never shows the query. */
function refusalOf(result: Awaited<ReturnType<typeof fetchSource>>, reason: TransferRefusal['reason']): string {
  assert.equal(result.ok, false, 'a refusal')
  const r = result as TransferRefusal
  assert.equal(r.reason, reason, r.detail)
  noSecret(r.detail)
  return r.detail
}

const chunksOf = (...parts: Uint8Array[]) =>
  async function* () {
    yield* parts
  }

test('fetchSource: the exact bytes, in shared memory, named by Content-Disposition (filename*, filename) or the final path', BOUNDED, async (t) => {
  const pdf = randomBytes(300_000)
  const s = await serve(t, (req, res) => {
    if (req.url!.startsWith('/plain/')) res.setHeader('content-disposition', 'attachment; filename="report \\"Q3\\".pdf"')
    if (req.url!.startsWith('/extended/')) res.setHeader('content-disposition', `attachment; filename="fallback.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`)
    if (req.url!.startsWith('/chunked/')) {
      res.write(pdf.subarray(0, 1000))
      res.write(pdf.subarray(1000, 200_000))
      res.end(pdf.subarray(200_000))
    } else res.end(pdf)
  })
  const base = `http://127.0.0.1:${s.port}`
  const cases: [string, string | null][] = [
    [`/plain/ignored.pdf?${SECRET}`, 'report "Q3".pdf'],
    ['/extended/ignored.pdf', 'résumé.pdf'],
    [`/files/annual%20report.pdf?${SECRET}`, 'annual report.pdf'],
    ['/chunked/b.pdf', 'b.pdf'],
    ['/', null],
  ]
  for (const [path, filename] of cases) {
    const got = await fetchSource(`${base}${path}`, LOCAL)
    assert.ok(got.ok, path)
    assert.ok(got.bytes.buffer instanceof SharedArrayBuffer, 'over a SharedArrayBuffer')
    assert.equal(got.bytes.byteLength, pdf.length)
    assert.ok(Buffer.from(got.bytes).equals(pdf), 'the exact bytes')
    assert.equal(got.filename, filename, path)
  }
  assert.equal(s.seen[0]!.url, `/plain/ignored.pdf?${SECRET}`, 'the query is sent as it is')
  assert.equal(s.seen[0]!.headers['user-agent'], `tessera-jobs/${VERSION}`)
  assert.equal(s.seen[0]!.headers.accept, 'application/pdf, */*')
  // The cap is inclusive: exactly maxBytes is taken, one byte less is too little room.
  assert.ok((await fetchSource(`${base}/x`, { ...LOCAL, maxBytes: pdf.length })).ok)
  assert.ok((await fetchSource(`${base}/chunked/x`, { ...LOCAL, maxBytes: pdf.length })).ok)
  refusalOf(await fetchSource(`${base}/chunked/x`, { ...LOCAL, maxBytes: pdf.length - 1 }), 'too-large')
  assert.equal(s.connections(), s.seen.length, 'a connection of its own for every request: nothing pooled, nothing kept alive')
})

test('fetchSource: redirects are followed up to the limit, each hop resolved again, and one more is refused', BOUNDED, async (t) => {
  const statuses = [301, 302, 303, 307, 308]
  const s = await serve(t, (req, res) => {
    const hop = /^\/r\/(\d+)/.exec(req.url!)
    if (hop !== null) {
      const n = Number(hop[1])
      res.writeHead(statuses[n % statuses.length]!, { location: n > 1 ? `/r/${n - 1}?${SECRET}` : '/final.pdf' }).end('moved')
    } else if (req.url === '/to-name') res.writeHead(302, { location: `http://mirror.invalid:${s.port}/final.pdf?${SECRET}` }).end()
    else if (req.url === '/to-file') res.writeHead(302, { location: 'file:///etc/passwd' }).end()
    else if (req.url === '/nowhere') res.writeHead(302).end()
    else res.end('%PDF-1.7 final')
  })
  const base = `http://127.0.0.1:${s.port}`

  const three = await fetchSource(`${base}/r/3?${SECRET}`, LOCAL)
  assert.ok(three.ok)
  assert.equal(Buffer.from(three.bytes).toString(), '%PDF-1.7 final')
  assert.equal(three.filename, 'final.pdf', 'named by the final URL')
  assert.deepEqual(
    s.seen.map((r) => r.url.split('?')[0]),
    ['/r/3', '/r/2', '/r/1', '/final.pdf'],
  )
  assert.equal(s.connections(), 4, 'a connection of its own for every hop: nothing pooled')

  s.seen.length = 0
  assert.equal(refusalOf(await fetchSource(`${base}/r/4?${SECRET}`, LOCAL), 'refused'), 'more than 3 redirects')
  assert.equal(s.seen.length, 4, 'the fourth redirect is not followed')
  s.seen.length = 0
  assert.equal(refusalOf(await fetchSource(`${base}/r/1`, { ...LOCAL, maxRedirects: 0 }), 'refused'), 'more than 0 redirects')
  assert.equal(s.seen.length, 1)
  assert.ok((await fetchSource(`${base}/r/5`, { ...LOCAL, maxRedirects: 5 })).ok)

  // A redirect to a name: looked up through the lookup given, connected to its answer, sent with the name as Host.
  const looked: string[] = []
  const lookup: Lookup = async (host) => {
    looked.push(host)
    return [{ address: '127.0.0.1', family: 4 }]
  }
  s.seen.length = 0
  const named = await fetchSource(`${base}/to-name`, { ...LOCAL, lookup })
  assert.ok(named.ok)
  assert.deepEqual(looked, ['mirror.invalid'])
  assert.equal(s.seen[1]!.headers.host, `mirror.invalid:${s.port}`)

  // Every hop goes through the URL check again, and a redirect needs somewhere to go.
  assert.equal(refusalOf(await fetchSource(`${base}/to-file`, LOCAL), 'refused'), 'redirect 1 must be an http or https URL')
  assert.equal(refusalOf(await fetchSource(`${base}/nowhere`, LOCAL), 'failed'), 'HTTP 302 without a valid Location')
})

test('fetchSource and putResult: what the SSRF rules refuse is never connected to', BOUNDED, async (t) => {
  const s = await serve(t, (_req, res) => res.end('%PDF'))
  const loopback: Lookup = async () => [{ address: '127.0.0.1', family: 4 }]
  const strict = { ...LOCAL, allowPrivate: false }
  const cases: [string, Lookup | undefined, string][] = [
    [`http://127.0.0.1:${s.port}/a.pdf?${SECRET}`, undefined, 'the URL must be an https URL'],
    [`http://files.example.com:${s.port}/a.pdf?${SECRET}`, loopback, 'the URL must be an https URL'],
    [`https://127.0.0.1:${s.port}/a.pdf?${SECRET}`, undefined, 'the URL must reach a public address, not a loopback one'],
    [`https://[::ffff:127.0.0.1]:${s.port}/a.pdf`, undefined, 'the URL must reach a public address, not a loopback one'],
    [`https://localhost:${s.port}/a.pdf?${SECRET}`, undefined, 'the URL must name a public host'],
    [`https://files.example.com:${s.port}/a.pdf?${SECRET}`, loopback, 'files.example.com resolves to an address that is not public'],
  ]
  for (const [url, lookup, detail] of cases) {
    assert.equal(refusalOf(await fetchSource(url, { ...strict, lookup }), 'refused'), detail, url)
    const put = await putResult(url, { size: 4, contentType: 'application/pdf', chunks: chunksOf(Buffer.from('%PDF')) }, { ...strict, lookup })
    assert.deepEqual(put, { statusCode: null, error: `refused: ${detail}` }, url)
  }
  assert.equal(s.connections(), 0, 'no connection was made')
  assert.equal(s.seen.length, 0)
})

test('fetchSource: private answers and redirects to private places are refused at every hop (the hop request stood in for)', BOUNDED, async () => {
  const PUBLIC = '93.184.215.14'
  const names: Record<string, { address: string; family: number }[]> = {
    'files.example.com': [{ address: PUBLIC, family: 4 }],
    'cdn.example.com': [{ address: '93.184.215.15', family: 4 }],
    'internal.example.com': [{ address: '10.0.0.5', family: 4 }],
    'mixed.example.com': [
      { address: PUBLIC, family: 4 },
      { address: '10.0.0.5', family: 4 },
    ],
  }
  const lookup: Lookup = async (host) => names[host] ?? []
  // As a public host at files.example.com would answer: a redirect to wherever the path says.
  const fake = () => {
    const sent: Outgoing[] = []
    const send: Exchange = async (outgoing) => {
      sent.push(outgoing)
      const to = outgoing.url.pathname === '/go' ? decodeURIComponent(outgoing.url.searchParams.get('to')!) : null
      return to === null
        ? { status: 200, headers: {}, body: Readable.from([Buffer.from('%PDF-1.7 public')]) }
        : { status: 302, headers: { location: to }, body: Readable.from([]) }
    }
    return { sent, send }
  }
  const strict = { ...LOCAL, allowPrivate: false, lookup }

  for (const [url, detail] of [
    ['https://internal.example.com/a.pdf', 'internal.example.com resolves to an address that is not public'],
    ['https://mixed.example.com/a.pdf', 'mixed.example.com resolves to an address that is not public'],
  ] as const) {
    const f = fake()
    assert.equal(refusalOf(await fetchSourceVia(f.send, url, strict), 'refused'), detail)
    assert.equal(f.sent.length, 0, 'nothing sent')
  }

  const redirect = (to: string) => `https://files.example.com/go?to=${encodeURIComponent(to)}&${SECRET}`
  for (const [to, detail] of [
    [`https://internal.example.com/b.pdf?${SECRET}`, 'redirect 1: internal.example.com resolves to an address that is not public'],
    ['https://mixed.example.com/b.pdf', 'redirect 1: mixed.example.com resolves to an address that is not public'],
    ['http://cdn.example.com/b.pdf', 'redirect 1 must be an https URL'],
    ['https://127.0.0.1/b.pdf', 'redirect 1 must reach a public address, not a loopback one'],
    ['https://169.254.169.254/latest/meta-data', 'redirect 1 must reach a public address, not a link-local one'],
    ['https://localhost/b.pdf', 'redirect 1 must name a public host'],
    ['https://localhost./b.pdf', 'redirect 1 must name a public host'],
    ['https://metadata.google.internal./b.pdf', 'redirect 1 must name a public host'],
    ['https://[::ffff:a00:5]/b.pdf', 'redirect 1 must reach a public address, not a private one'],
    ['https://[2001::a00:5]/b.pdf', 'redirect 1 must reach a public address, not a Teredo one'],
  ] as const) {
    const f = fake()
    assert.equal(refusalOf(await fetchSourceVia(f.send, redirect(to), strict), 'refused'), detail, to)
    assert.equal(f.sent.length, 1, 'only the first hop was sent')
  }

  // The same loop follows a redirect to a public host, pinned to the address its lookup answered.
  const f = fake()
  const got = await fetchSourceVia(f.send, redirect('https://cdn.example.com/doc.pdf'), strict)
  assert.ok(got.ok)
  assert.equal(got.filename, 'doc.pdf')
  assert.deepEqual(
    f.sent.map((o) => [o.url.hostname, o.target.address, o.method]),
    [
      ['files.example.com', PUBLIC, 'GET'],
      ['cdn.example.com', '93.184.215.15', 'GET'],
    ],
  )
})

test('fetchSource: a Content-Length over the cap is refused at once', BOUNDED, async (t) => {
  const s = await serve(t, (_req, res) => {
    res.writeHead(200, { 'content-length': String(10 * 1024 * 1024) })
    res.write(Buffer.alloc(16 * 1024))
    // …and never the rest: reading on would wait for the deadline.
  })
  const started = performance.now()
  const detail = refusalOf(await fetchSource(`http://127.0.0.1:${s.port}/big.pdf?${SECRET}`, { ...LOCAL, timeoutMs: 5000 }), 'too-large')
  assert.equal(detail, '10485760 bytes, over the limit of 1048576')
  assert.ok(performance.now() - started < 2000, 'before the deadline')
})

test('fetchSource: a chunked body over the cap is refused as it passes the cap, and its connection closed', BOUNDED, async (t) => {
  let sent = 0
  let closed: Promise<void> = new Promise(() => {})
  const s = await serve(t, (_req, res) => {
    closed = new Promise((resolve) => res.on('close', () => resolve()))
    const chunk = Buffer.alloc(64 * 1024, 7)
    const pump = () => {
      if (res.destroyed) return
      sent += chunk.length
      if (res.write(chunk)) setImmediate(pump)
      else res.once('drain', pump)
    }
    pump()
  })
  const started = performance.now()
  const detail = refusalOf(await fetchSource(`http://127.0.0.1:${s.port}/endless`, { ...LOCAL, maxBytes: 256 * 1024, timeoutMs: 5000 }), 'too-large')
  assert.equal(detail, 'over the limit of 262144 bytes')
  assert.ok(performance.now() - started < 2000, 'before the deadline')
  const timeout = new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 2000).unref())
  assert.equal(await Promise.race([closed.then(() => 'closed'), timeout]), 'closed', 'the server saw the connection close')
  assert.ok(sent > 256 * 1024)
})

test('fetchSource: one deadline, for a server that never answers and for a name that never resolves', BOUNDED, async (t) => {
  const s = await serve(t, () => {})
  for (const [url, lookup] of [
    [`http://127.0.0.1:${s.port}/slow.pdf?${SECRET}`, undefined],
    [`http://never.invalid/slow.pdf?${SECRET}`, () => new Promise<never>(() => {})],
  ] as const) {
    const started = performance.now()
    assert.equal(refusalOf(await fetchSource(url, { ...LOCAL, timeoutMs: 300, lookup }), 'failed'), 'timed out after 300 ms')
    const took = performance.now() - started
    assert.ok(took >= 290 && took < 1500, `took ${took} ms`)
  }
})

test('fetchSource: a non-2xx answer fails with its status, its body not waited for; a body cut short and a closed port fail', BOUNDED, async (t) => {
  const s = await serve(t, (req, res) => {
    if (req.url!.startsWith('/missing')) res.writeHead(404).end('not here')
    else if (req.url!.startsWith('/cut')) {
      // Half the body announced, then the connection drops: a failure, not a shorter PDF.
      res.writeHead(200, { 'content-length': '1000' })
      res.write(Buffer.alloc(500), () => res.socket?.destroy())
    } else {
      // An endless error page: only dropping it unread (or after a bounded read) answers before the deadline.
      res.writeHead(500)
      res.write(Buffer.alloc(200 * 1024))
    }
  })
  assert.equal(refusalOf(await fetchSource(`http://127.0.0.1:${s.port}/missing.pdf?${SECRET}`, LOCAL), 'failed'), 'HTTP 404')
  const started = performance.now()
  assert.equal(refusalOf(await fetchSource(`http://127.0.0.1:${s.port}/broken?${SECRET}`, { ...LOCAL, timeoutMs: 5000 }), 'failed'), 'HTTP 500')
  assert.ok(performance.now() - started < 2000, 'before the deadline')
  assert.equal(refusalOf(await fetchSource(`http://127.0.0.1:${s.port}/cut.pdf?${SECRET}`, LOCAL), 'failed'), 'ECONNRESET')

  const gone = http.createServer()
  await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve))
  const port = (gone.address() as AddressInfo).port
  await new Promise((resolve) => gone.close(resolve))
  assert.equal(refusalOf(await fetchSource(`http://127.0.0.1:${port}/a.pdf?${SECRET}`, LOCAL), 'failed'), 'ECONNREFUSED')
})

/** certificate: a self-signed certificate for `localhost` (openssl), or null when there is no openssl. */
function certificate(t: TestContext): { key: string; cert: string } | null {
  const dir = mkdtempSync(join(tmpdir(), 'transfer-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  try {
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost'].concat([
        '-addext',
        'subjectAltName=DNS:localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ]),
      { stdio: 'ignore' },
    )
  } catch {
    return null
  }
  return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') }
}

test('fetchSource and putResult over HTTPS: connected to the pinned address, the certificate verified for the URL name', BOUNDED, async (t) => {
  const tls = certificate(t)
  if (tls === null) return t.skip('no openssl to make a certificate')
  const s = await serve(t, (req, res) => (req.method === 'PUT' ? req.resume().on('end', () => res.writeHead(201).end()) : res.end('%PDF-1.7 tls')), tls)
  const lookup: Lookup = async () => [{ address: '127.0.0.1', family: 4 }]
  const got = await fetchSource(`https://localhost:${s.port}/a.pdf?${SECRET}`, { ...LOCAL, ca: tls.cert, lookup })
  assert.ok(got.ok)
  assert.equal(Buffer.from(got.bytes).toString(), '%PDF-1.7 tls')
  const put = await putResult(
    `https://localhost:${s.port}/out.pdf?${SECRET}`,
    { size: 4, contentType: 'application/pdf', chunks: chunksOf(Buffer.from('%PDF')) },
    {
      timeoutMs: 3000,
      allowPrivate: true,
      ca: tls.cert,
      lookup,
    },
  )
  assert.deepEqual(put, { statusCode: 201, error: null })
  // Not trusted without the CA; and a name the certificate does not hold fails, though the address is the same.
  assert.match(refusalOf(await fetchSource(`https://localhost:${s.port}/a.pdf?${SECRET}`, { ...LOCAL, lookup }), 'failed'), /SELF_SIGNED|UNABLE_TO_VERIFY/)
  assert.equal(
    refusalOf(await fetchSource(`https://other.example:${s.port}/a.pdf`, { ...LOCAL, ca: tls.cert, lookup }), 'failed'),
    'ERR_TLS_CERT_ALTNAME_INVALID',
  )
  assert.equal(s.seen.length, 2, 'only the verified requests arrived')
})

/** receiver: a PUT target that keeps what it is sent and answers (201 by default) once it has it all. */
async function receiver(
  t: TestContext,
  answer: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void = (_q, res) => res.writeHead(201).end(),
) {
  const bodies: Buffer[] = []
  const s = await serve(t, (req, res) => {
    const parts: Buffer[] = []
    req.on('data', (chunk: Buffer) => parts.push(chunk))
    req.on('end', () => {
      bodies.push(Buffer.concat(parts))
      answer(req, res, Buffer.concat(parts))
    })
  })
  return { ...s, bodies }
}

test('putResult: the receiver gets exactly the bytes, with their length, type and the extra headers, not chunked', BOUNDED, async (t) => {
  const r = await receiver(t)
  const shared = new Uint8Array(new SharedArrayBuffer(3000)).fill(9)
  const parts = [randomBytes(1000), new Uint8Array(0), shared, randomBytes(5000)]
  const size = parts.reduce((n, p) => n + p.byteLength, 0)
  const body: ResultBody = { size, contentType: 'application/pdf', chunks: chunksOf(...parts), headers: { 'x-ms-blob-type': 'BlockBlob' } }
  const put = await putResult(`http://127.0.0.1:${r.port}/bucket/out.pdf?${SECRET}`, body, { timeoutMs: 3000, allowPrivate: true })
  assert.deepEqual(put, { statusCode: 201, error: null })
  assert.equal(r.seen.length, 1)
  const { method, url, headers } = r.seen[0]!
  assert.equal(method, 'PUT')
  assert.equal(url, `/bucket/out.pdf?${SECRET}`, 'the presigned query is sent as it is')
  assert.equal(headers['content-length'], String(size))
  assert.equal(headers['content-type'], 'application/pdf')
  assert.equal(headers['x-ms-blob-type'], 'BlockBlob')
  assert.equal(headers['transfer-encoding'], undefined)
  assert.equal(headers['user-agent'], `tessera-jobs/${VERSION}`)
  assert.ok(r.bodies[0]!.equals(Buffer.concat(parts)), 'the exact bytes')
})

test('putResult: a 403, a 307 (not followed) fail with their status; an early 403 stops the upload', BOUNDED, async (t) => {
  const r = await receiver(t, (req, res) => {
    if (req.url!.startsWith('/denied')) res.writeHead(403, { 'content-type': 'application/xml' }).end('<Error><Code>AccessDenied</Code></Error>')
    else res.writeHead(307, { location: '/elsewhere' }).end()
  })
  const small = (): ResultBody => ({ size: 4, contentType: 'application/pdf', chunks: chunksOf(Buffer.from('%PDF')) })
  const options = { timeoutMs: 3000, allowPrivate: true }
  const denied = await putResult(`http://127.0.0.1:${r.port}/denied/out.pdf?${SECRET}`, small(), options)
  assert.deepEqual(denied, { statusCode: 403, error: 'HTTP 403' })
  const moved = await putResult(`http://127.0.0.1:${r.port}/moved/out.pdf?${SECRET}`, small(), options)
  assert.deepEqual(moved, { statusCode: 307, error: 'HTTP 307' })
  assert.deepEqual(
    r.seen.map((s) => s.url.split('?')[0]),
    ['/denied/out.pdf', '/moved/out.pdf'],
    'the redirect was not followed',
  )

  // A receiver that refuses on the headers (and would read on): the status, promptly, and nothing more sent after it.
  const early = await serve(t, (req, res) => {
    req.resume()
    res.writeHead(403).end('no')
  })
  let pulled = 0
  const slow: ResultBody = {
    size: 50 * 64 * 1024,
    contentType: 'application/pdf',
    chunks: async function* () {
      for (let i = 0; i < 50; i++) {
        pulled++
        yield Buffer.alloc(64 * 1024)
        await new Promise((resolve) => setTimeout(resolve, 60))
      }
    },
  }
  const started = performance.now()
  assert.deepEqual(await putResult(`http://127.0.0.1:${early.port}/x?${SECRET}`, slow, { timeoutMs: 10_000, allowPrivate: true }), {
    statusCode: 403,
    error: 'HTTP 403',
  })
  assert.ok(performance.now() - started < 1500, 'on the answer, not at the end of the body (3 s) or the deadline')
  const pulledAtAnswer = pulled
  await new Promise((resolve) => setTimeout(resolve, 300))
  assert.ok(pulled <= pulledAtAnswer + 1, `${pulled - pulledAtAnswer} chunks pulled after the answer`)
})

test('putResult: chunks that add up to another size than announced fail, and the receiver never gets a whole request', BOUNDED, async (t) => {
  const ended: boolean[] = []
  const s = await serve(t, (req, res) => {
    req.resume()
    req.on('end', () => ended.push(true))
    req.on('close', () => {
      if (!req.complete) res.destroy()
    })
    req.on('end', () => res.writeHead(201).end())
  })
  const url = `http://127.0.0.1:${s.port}/out.pdf?${SECRET}`
  const options = { timeoutMs: 3000, allowPrivate: true }
  const short = await putResult(url, { size: 10, contentType: 'application/pdf', chunks: chunksOf(Buffer.from('%PDF-')) }, options)
  assert.deepEqual(short, { statusCode: null, error: 'the result is 5 bytes, not the 10 announced' })
  const long = await putResult(url, { size: 4, contentType: 'application/pdf', chunks: chunksOf(Buffer.from('%PDF'), Buffer.from('-1.7')) }, options)
  assert.deepEqual(long, { statusCode: null, error: 'the result is longer than the 4 bytes announced' })
  await new Promise((resolve) => setTimeout(resolve, 100))
  assert.deepEqual(ended, [], 'no request arrived whole')

  // A receiver that answers 200 before the body is all sent has not stored it whole: still a failure.
  const hasty = await serve(t, (_req, res) => res.writeHead(200).end())
  const slowShort = async function* () {
    yield Buffer.from('%PDF-')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const answer = await putResult(`http://127.0.0.1:${hasty.port}/x`, { size: 10, contentType: 'application/pdf', chunks: slowShort }, options)
  assert.equal(answer.statusCode, null)
  assert.notEqual(answer.error, null)
  noSecret(answer.error)
})

test('putResult: a receiver that stalls is given up at the deadline', BOUNDED, async (t) => {
  const s = await serve(t, () => {})
  const big: ResultBody = {
    size: 64 * 1024 * 1024,
    contentType: 'application/pdf',
    chunks: async function* () {
      for (let i = 0; i < 64; i++) yield Buffer.alloc(1024 * 1024)
    },
  }
  const started = performance.now()
  const put = await putResult(`http://127.0.0.1:${s.port}/out.pdf?${SECRET}`, big, { timeoutMs: 400, allowPrivate: true })
  assert.deepEqual(put, { statusCode: null, error: 'timed out after 400 ms' })
  const took = performance.now() - started
  assert.ok(took >= 390 && took < 1500, `took ${took} ms`)
})

test('putResult: 20 MiB stream through, their chunks pulled only as the connection takes them', BOUNDED, async (t) => {
  const CHUNK = 1024 * 1024
  const COUNT = 20
  let pulled = 0
  let pulledBeforeRead = -1
  const sentHash = createHash('sha256')
  const receivedHash = createHash('sha256')
  let received = 0
  const s = await serve(t, (req, res) => {
    // Hold the body unread for a while: a sender that ignored backpressure would pull everything meanwhile.
    setTimeout(() => {
      pulledBeforeRead = pulled
      req.on('data', (chunk: Buffer) => {
        received += chunk.length
        receivedHash.update(chunk)
      })
      req.on('end', () => res.writeHead(200).end())
    }, 300)
  })
  const body: ResultBody = {
    size: CHUNK * COUNT,
    contentType: 'application/pdf',
    chunks: async function* () {
      for (let i = 0; i < COUNT; i++) {
        pulled++
        const chunk = randomBytes(CHUNK)
        sentHash.update(chunk)
        yield chunk
      }
    },
  }
  const put = await putResult(`http://127.0.0.1:${s.port}/big.pdf`, body, { timeoutMs: 10_000, allowPrivate: true })
  assert.deepEqual(put, { statusCode: 200, error: null })
  assert.equal(received, CHUNK * COUNT)
  assert.equal(receivedHash.digest('hex'), sentHash.digest('hex'))
  assert.ok(pulledBeforeRead >= 1 && pulledBeforeRead < COUNT / 2, `pulled ${pulledBeforeRead} of ${COUNT} chunks before the receiver read`)
})
