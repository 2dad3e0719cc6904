/**
 * The OpenAPI document as its users meet it: what each region serves lints clean (Redocly's
 * recommended rules, redocly.yaml), each operation keeps the name Renda.io gave it, answers
 * are checked against it (conformance.ts, for every test) and a client generated from it
 * (docs/openapi.d.ts + openapi-fetch) works against a real node.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import createClient from 'openapi-fetch'
import type { paths } from '../../../docs/openapi.d.ts'
import { startApp, tempDir } from '../../support/helper.ts'
import { startAdmin } from '../../support/admin-helper.ts'
import { checkAnswer, Mismatch, type OpenApiDocument } from '../../support/conformance.ts'

const ROOT = new URL('../../..', import.meta.url).pathname
const REDOCLY = join(ROOT, 'node_modules/@redocly/cli/bin/cli.js')

/** The names Renda.io's clients know; changing one breaks every generated client. */
const OPERATION_IDS: Record<string, string> = {
  'GET /healthz': 'checkLiveness',
  'GET /readyz': 'checkReadiness',
  'GET /totp/ping': 'ping',
  'POST /totp/generateQRCode': 'generateQRCode',
  'POST /totp/onboardUser': 'onboardUser',
  'POST /totp/getOTP': 'getOTP',
  'POST /totp/verifyOTP': 'verifyOTP',
  'POST /converter/generateImage': 'generateImage',
  'POST /converter/generatePostscript': 'generatePostscript',
  // The PDF toolkit: ours, as stable.
  'POST /converter/extractText': 'extractText',
  'POST /converter/merge': 'mergePdfs',
  'POST /converter/split': 'splitPdf',
  'POST /converter/rotate': 'rotatePdf',
  'POST /converter/flatten': 'flattenPdf',
  'POST /converter/compress': 'compressPdf',
  // Managed factors: ours (Renda.io had none), as stable as Renda.io's.
  'POST /totp/users/{userID}/factors': 'createFactor',
  'POST /totp/users/{userID}/factors/import': 'importFactor',
  'GET /totp/users/{userID}/factors': 'listFactors',
  'DELETE /totp/users/{userID}/factors/{factorID}': 'deleteFactor',
  'POST /totp/users/{userID}/factors/{factorID}/activate': 'activateFactor',
  'POST /totp/users/{userID}/factors/{factorID}/resync': 'resyncFactor',
  'POST /totp/users/{userID}/verify': 'verifyUser',
  'POST /totp/users/{userID}/recovery-codes': 'createRecoveryCodes',
  'POST /totp/users/{userID}/recover': 'recoverUser',
  'DELETE /totp/users/{userID}': 'deleteUser',
  // Passkeys beside them.
  'POST /totp/users/{userID}/passkeys/registration/options': 'passkeyRegistrationOptions',
  'POST /totp/users/{userID}/passkeys/registration': 'registerPasskey',
  'POST /totp/users/{userID}/passkeys/authentication/options': 'passkeyAuthenticationOptions',
  'POST /totp/users/{userID}/passkeys/authentication': 'authenticatePasskey',
  'POST /totp/passkeys/authentication/options': 'passkeyDiscoverableOptions',
  'POST /totp/passkeys/authentication': 'authenticateDiscoverablePasskey',
  // Conversion jobs: ours too.
  'POST /converter/jobs': 'submitConversionJob',
  'GET /converter/jobs': 'listConversionJobs',
  'GET /converter/jobs/{jobID}': 'getConversionJob',
  'GET /converter/jobs/{jobID}/result': 'getConversionJobResult',
  'DELETE /converter/jobs/{jobID}': 'cancelConversionJob',
}

interface Operation {
  operationId?: string
  security?: unknown[]
  responses: Record<string, unknown>
}
type Doc = OpenApiDocument & { paths: Record<string, Record<string, Operation>> }

async function served(url: string): Promise<Doc> {
  const res = await fetch(`${url}/openapi.json`)
  assert.equal(res.status, 200)
  return (await res.json()) as Doc
}

function operations(doc: Doc): [string, Operation][] {
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op] as [string, Operation]),
  )
}

interface LintProblem {
  ruleId: string
  severity: string
  message: string
  location: { pointer: string }[]
}

/** lint runs the Redocly CLI with the project's redocly.yaml on one file and returns its problems. */
async function lint(file: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)(process.execPath, [REDOCLY, 'lint', '--config', join(ROOT, 'redocly.yaml'), '--format', 'json', file], {
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    maxBuffer: 16 << 20,
  }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' })) // it exits 1 when it finds errors
  const { problems } = JSON.parse(stdout) as { problems: LintProblem[] }
  return problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`)
}

test("the document each region serves lints clean with Redocly's recommended rules", async (t) => {
  const dir = tempDir(t)
  const files: Record<string, string> = {}
  for (const region of ['eu', 'us'] as const) {
    const app = await startApp(t, { REGION: region, PUBLIC_BASE_URL: `https://${region}.api.tessera.test`, EU_BASE_URL: 'https://eu.api.tessera.test' })
    const doc = await served(app.url)
    assert.equal(
      Object.keys(doc.paths).some((p) => p.startsWith('/converter/')),
      region === 'eu',
      `converter routes in ${region}`,
    )
    files[region] = join(dir, `${region}.json`)
    writeFileSync(files[region], JSON.stringify(doc))
    if (region === 'eu') {
      // The same document with the faults the linter found before: proof that the rules run.
      const broken = structuredClone(doc)
      delete broken.paths['/totp/getOTP']!.post!.operationId
      const ok = broken.paths['/converter/generateImage']!.post!.responses['200'] as { headers: Record<string, { schema: unknown }> }
      ok.headers['X-Page-Count']!.schema = { schema: { type: 'integer' } }
      files.broken = join(dir, 'broken.json')
      writeFileSync(files.broken, JSON.stringify(broken))
    }
  }
  const [eu, us, broken] = await Promise.all([lint(files.eu!), lint(files.us!), lint(files.broken!)])
  assert.deepEqual(eu, [])
  assert.deepEqual(us, [])
  assert.deepEqual(broken!.map((p) => p.split(' ').slice(0, 2).join(' ')).sort(), ['error struct', 'warn operation-operationId'])
})

test('every operation has the stable operationId Renda.io gave it, and every guarded one documents its 4xx answers', async (t) => {
  const app = await startApp(t)
  const doc = await served(app.url)
  const ops = operations(doc)
  assert.deepEqual(Object.fromEntries(ops.map(([name, op]) => [name, op.operationId])), OPERATION_IDS)
  for (const [name, op] of ops) {
    if (op.security?.length === 0) continue // no key: /healthz and /readyz take no input either
    assert.ok(
      Object.keys(op.responses).some((s) => /^4/.test(s)),
      `${name} documents a 4xx answer`,
    )
  }
})

test('the answer check rejects what the document does not describe', async (t) => {
  const app = await startApp(t)
  const doc = await served(app.url)
  const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } })

  await checkAnswer(doc, 'POST', '/totp/getOTP', json({ type: 'Success', otp: '123456', expiresIn: 12, currentToken: '123456', timeUsed: 18 }))
  await checkAnswer(doc, 'GET', '/no/such/route', json({ message: 'x' }, 404)) // not in the document: not checked
  const rejected = async (path: string, res: Response, why: RegExp, method = 'POST') =>
    assert.rejects(checkAnswer(doc, method, path, res), (e: unknown) => e instanceof Mismatch && why.test(e.message))
  await rejected('/totp/getOTP', json({ type: 'Success', expiresIn: 12 }), /must have required property 'otp'/)
  await rejected('/totp/getOTP', json([{ type: 'Error', code: 'NOT_A_CODE', message: 'x' }], 400), /code must be equal to one of the allowed values/)
  await rejected('/totp/getOTP', json({}, 418), /status not in the document/)
  await rejected('/totp/ping', new Response('pong', { headers: { 'content-type': 'text/plain' } }), /content type 'text\/plain'/, 'GET')
  await rejected('/totp/ping', new Response('{"type":', { headers: { 'content-type': 'application/json' } }), /does not parse/, 'GET')
  await rejected(
    '/converter/generatePostscript',
    new Response('%!PS', { headers: { 'content-type': 'application/postscript', 'x-page-count': 'many' } }),
    /header X-Page-Count/,
  )
})

test('generatePostscript documents the dpi refusal it answers (what a validating proxy flagged)', async (t) => {
  const app = await startApp(t)
  const form = new FormData()
  form.set('pdfDocument', new Blob(['not a pdf']), 'a.pdf')
  form.set('dpi', 'abc')
  // The helper's fetch rejects an answer the document does not describe.
  const res = await fetch(`${app.url}/converter/generatePostscript`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  assert.equal(res.status, 400)
  assert.deepEqual(
    ((await res.json()) as { code: string }[]).map((e) => e.code),
    ['NOT_A_PDF', 'DPI_INVALID'],
  )
})

test('a client generated from the document (openapi-fetch + docs/openapi.d.ts) onboards, gets and verifies a code against a real node', async (t) => {
  const app = await startApp(t)
  const client = createClient<paths>({ baseUrl: app.url, headers: { 'x-api-key': app.key } })

  const ping = await client.GET('/totp/ping')
  assert.equal(ping.data?.message, 'Ping successful')

  const onboarded = await client.POST('/totp/onboardUser', { body: { userID: 'jane@example.com', applicationID: 'Acme Portal' } })
  assert.equal(onboarded.response.status, 200)
  const secretKey = onboarded.data!.secretKey
  assert.match(onboarded.data!.otpURL, /^otpauth:\/\/totp\/Acme%20Portal:jane%40example\.com\?/)

  const current = await client.POST('/totp/getOTP', { body: { secret: secretKey } })
  assert.equal(current.data?.otp, onboarded.data!.otp)

  const verified = await client.POST('/totp/verifyOTP', { body: { secret: secretKey, token: current.data!.otp } })
  assert.equal(verified.data?.valid, true)

  // Errors are typed too: the catalogue's list shape, with the codes the route documents.
  const refused = await client.POST('/totp/getOTP', { body: { secret: 'not base32!' } })
  assert.equal(refused.response.status, 400)
  assert.ok(Array.isArray(refused.error), 'a list of problems')
  assert.deepEqual(
    refused.error.map((e) => e.code),
    ['SECRET_INVALID'],
  )
})

/** A path of this repository in a text: what a server's readers do not have (`docs/errors.md`, `src/…`, `README.md`). */
const REPOSITORY_PATH = /(?<![\w/.-])(?:docs|src|scripts|test|bench|deploy)\/[\w.-]|\.md\b/

/**
 * readerProblems: what a reader of the document would trip on: an answer without a description
 * of its own ("Default Response", @fastify/swagger's stand-in), or a description that sends them
 * to a file of the repository. It also returns the Markdown links of the descriptions.
 */
function readerProblems(doc: Doc): { problems: string[]; links: string[] } {
  const problems: string[] = []
  const links = new Set<string>()
  for (const [name, op] of operations(doc)) {
    for (const [status, answer] of Object.entries(op.responses)) {
      const description = (answer as { description?: unknown }).description
      if (typeof description !== 'string' || description.trim() === '' || description === 'Default Response')
        problems.push(`${name} ${status}: no description of its own (${JSON.stringify(description)})`)
    }
  }
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) {
      for (const [i, n] of node.entries()) walk(n, `${where}/${i}`)
    } else if (node !== null && typeof node === 'object')
      for (const [k, v] of Object.entries(node)) {
        if ((k === 'description' || k === 'summary') && typeof v === 'string') {
          const path = v.match(REPOSITORY_PATH)
          if (path !== null) problems.push(`${where}/${k}: names a repository path (…${v.slice(Math.max(0, path.index! - 30), path.index! + 30)}…)`)
          for (const m of v.matchAll(/\]\(([^)\s]+)\)/g)) links.add(m[1]!)
        }
        walk(v, `${where}/${k}`)
      }
  }
  walk(doc, '#')
  return { problems, links: [...links] }
}

test('every answer of every operation, in both served documents and the committed ones, has a description, and no description sends readers to the repository: its links work on the server', async (t) => {
  const pub = await startApp(t)
  const admin = await startAdmin(t)
  const served = {
    '/openapi.json': `${pub.url}/openapi.json`,
    '/admin/v1/openapi.json': `${admin.url}/admin/v1/openapi.json`,
  }
  const linked: string[] = []
  for (const [name, url] of Object.entries(served)) {
    const res = await fetch(url)
    assert.equal(res.status, 200)
    const { problems, links } = readerProblems((await res.json()) as Doc)
    assert.deepEqual(problems, [], name)
    // A relative link resolves against the document's address, as it does on the reference page beside it.
    for (const link of links.filter((l) => !/^[a-z]+:/.test(l))) {
      const target = new URL(link, url)
      const page = await fetch(target)
      assert.equal(page.status, 200, `${name}: ${link} answers`)
      if (target.hash !== '') assert.match(await page.text(), new RegExp(`id="${target.hash.slice(1)}"`), `${name}: ${link} has its anchor`)
      linked.push(`${name} ${link}`)
    }
  }
  assert.ok(linked.includes('/openapi.json docs#errors'), "a job's error links to the served error reference")
  for (const file of ['docs/openapi.json', 'docs/admin-openapi.json']) {
    assert.deepEqual(readerProblems(JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as Doc).problems, [], file)
  }

  // The check finds what it looks for: an answer left to the stand-in, a description naming a file.
  const broken = (await (await fetch(served['/openapi.json'])).json()) as Doc
  ;(broken.paths['/totp/ping']!.get!.responses['200'] as { description: string }).description = 'Default Response'
  ;(broken.paths['/totp/ping']!.get! as { description?: string }).description = 'See docs/errors.md.'
  assert.deepEqual(
    readerProblems(broken).problems.map((p) => p.split(':')[0]),
    ['GET /totp/ping 200', '#/paths//totp/ping/get/description'],
  )
})
