/**
 * Conformance: every answer a test receives from an app it started is checked against the
 * OpenAPI document that app serves, for the answer's path, method, status and content type:
 * the status must be documented, the content type too, a JSON body must match its schema
 * and a documented header its own. A client generated from the document relies on exactly
 * this. Bodies other than JSON (PNG, zip, PostScript) are not read here, so that tests of
 * slow or stalled readers keep control of the stream.
 *
 * Each schema is compiled once per test process, on first use, whatever the number of apps.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'

interface Operation {
  responses?: Record<string, { content?: Record<string, unknown>; headers?: Record<string, { schema?: unknown }> }>
}
export type OpenApiDocument = { paths?: Record<string, Record<string, Operation>> }

/** Mismatch is an answer that the document does not describe. */
export class Mismatch extends Error {
  override name = 'Mismatch'
}

// One ajv for the process, its validators keyed by the schema's text: apps whose documents differ
// elsewhere (another region, another limit) share the validators of the answers they have in common.
// date-time as RFC 3339 has it (the admin API's times): a date, 'T', a time and a zone.
const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i
const ajv = new Ajv2020({
  allErrors: true,
  strict: false,
  formats: { binary: true, 'date-time': (s: string) => DATE_TIME.test(s) && !Number.isNaN(Date.parse(s)) },
})
const validators = new Map<string, ValidateFunction>()

/** validator compiles a schema of the document once; one with a $ref carries the document's components, where the reference points. */
function validator(doc: OpenApiDocument, schema: unknown): ValidateFunction {
  let text = JSON.stringify(schema)
  if (text.includes('"$ref"')) text = JSON.stringify({ ...(schema as object), components: (doc as { components?: unknown }).components })
  let v = validators.get(text)
  if (v === undefined) {
    v = ajv.compile(JSON.parse(text) as object)
    validators.set(text, v)
  }
  return v
}

/** pathOf finds the document's path for a URL path ({param} segments match any one segment). */
function pathOf(doc: OpenApiDocument, urlPath: string): string | undefined {
  const paths = Object.keys(doc.paths ?? {})
  if (paths.includes(urlPath)) return urlPath
  return paths.find((p) => p.includes('{') && new RegExp(`^${p.replace(/\{[^/]+\}/g, '[^/]+')}$`).test(urlPath))
}

/** headerValue reads a header as its schema's type, as a client would. */
function headerValue(raw: string, schema: unknown): unknown {
  const type = (schema as { type?: unknown }).type
  return (type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw
}

function problems(v: ValidateFunction): string {
  return (v.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message ?? e.keyword}`).join('; ')
}

/**
 * checkAnswer throws a Mismatch when the document does not describe this answer. Paths the
 * document does not list (an unknown route, /docs, a group not served in this region) are
 * not checked.
 */
export async function checkAnswer(doc: OpenApiDocument, method: string, urlPath: string, res: Response): Promise<void> {
  const path = pathOf(doc, urlPath)
  if (path === undefined) return
  const verb = method.toLowerCase() === 'head' ? 'get' : method.toLowerCase()
  const op = doc.paths![path]![verb]
  const what = `${method.toUpperCase()} ${urlPath} ${res.status}`
  if (op === undefined) return
  const status = [String(res.status), `${String(res.status)[0]}XX`, 'default'].find((s) => op.responses?.[s] !== undefined)
  if (status === undefined) throw new Mismatch(`${what}: status not in the document`)
  const documented = op.responses![status]!

  for (const [name, header] of Object.entries(documented.headers ?? {})) {
    const raw = res.headers.get(name)
    if (raw === null || header.schema === undefined) continue
    const v = validator(doc, header.schema)
    if (!v(headerValue(raw, header.schema))) throw new Mismatch(`${what}: header ${name}: ${problems(v)}`)
  }

  if (method.toUpperCase() === 'HEAD' || documented.content === undefined) return
  const mediaType = (res.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase()
  if (!(mediaType in documented.content)) {
    throw new Mismatch(`${what}: content type '${mediaType}' not in the document (${Object.keys(documented.content).join(', ')})`)
  }
  if (!/^application\/(.+\+)?json$/.test(mediaType)) return
  const text = await res.clone().text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new Mismatch(`${what}: the ${mediaType} body does not parse: ${text.slice(0, 200)}`)
  }
  const v = validator(doc, (documented.content[mediaType] as { schema?: unknown }).schema ?? {})
  if (!v(body)) throw new Mismatch(`${what}: ${problems(v)}; body ${text.slice(0, 300)}`)
}

/** Origins of the apps under test, each with the document it serves. */
const served = new Map<string, () => OpenApiDocument>()
const mismatches = new Map<string, string[]>()
const realFetch = globalThis.fetch

/** checkAnswersFrom checks every later answer from `origin` against `document()`; the returned function stops it and gives the mismatches seen. */
export function checkAnswersFrom(origin: string, document: () => OpenApiDocument): () => string[] {
  let doc: OpenApiDocument | undefined
  served.set(origin, () => (doc ??= document()))
  mismatches.set(origin, [])
  return () => {
    served.delete(origin)
    const seen = mismatches.get(origin) ?? []
    mismatches.delete(origin)
    return seen
  }
}

function requestOf(input: Parameters<typeof fetch>[0], init?: RequestInit): { url: URL; method: string } {
  if (input instanceof Request) return { url: new URL(input.url), method: init?.method ?? input.method }
  return { url: new URL(String(input)), method: init?.method ?? 'GET' }
}

/**
 * The global fetch, wrapped once per test process: a mismatch rejects the call that got the
 * answer (and is kept, so that a test that swallows the rejection still fails at its end).
 */
globalThis.fetch = async function checkedFetch(input, init) {
  const res = await realFetch(input, init)
  const { url, method } = requestOf(input, init)
  const document = served.get(url.origin)
  if (document === undefined) return res
  try {
    await checkAnswer(document(), method, url.pathname, res)
  } catch (error) {
    if (error instanceof Mismatch) mismatches.get(url.origin)?.push(error.message)
    throw error
  }
  return res
}
