/** Helpers for the conversion tests: the corpus (test/fixtures/corpus), multipart uploads, PNG and zip reading. */
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { inflateRawSync } from 'node:zlib'
import { PNG } from 'pngjs'
import { waitFor } from './receiver.ts'
import { CORPUS } from './corpus.ts'

export { CORPUS }
/** The corpus is in the repository: only a checkout that left test/fixtures out lacks it, and its tests then skip saying so. */
export const HAS_CORPUS = existsSync(join(CORPUS, 'real'))
export const SKIP_CORPUS = HAS_CORPUS ? false : 'test/fixtures/corpus is missing from this checkout'

export const real = (name: string) => readFileSync(join(CORPUS, 'real', name))
export const realFiles = () =>
  readdirSync(join(CORPUS, 'real'))
    .filter((f) => f.endsWith('.pdf'))
    .sort()
export const damagedFiles = () =>
  readdirSync(join(CORPUS, 'damaged'))
    .filter((f) => f !== 'LICENSE.txt')
    .sort()
export const damaged = (name: string) => readFileSync(join(CORPUS, 'damaged', name))

export function upload(
  base: string,
  path: string,
  key: string,
  file: Buffer | null,
  fields: Record<string, string> = {},
  filename = 'document.pdf',
  field = 'pdfDocument',
): Promise<Response> {
  const form = new FormData()
  if (file !== null) form.append(field, new Blob([new Uint8Array(file)], { type: 'application/pdf' }), filename)
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  return fetch(base + path, { method: 'POST', headers: { 'x-api-key': key }, body: form })
}

export function pngSize(png: Buffer): { width: number; height: number } {
  const image = PNG.sync.read(png)
  return { width: image.width, height: image.height }
}

export interface ZipEntry {
  readonly name: string
  readonly method: number
  readonly data: Buffer
}

/** unzip reads a zip from its central directory (stored or deflated entries), in archive order. */
export function unzip(zip: Buffer): ZipEntry[] {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  if (eocd < 0) throw new Error('no end of central directory: the zip is cut short')
  const count = zip.readUInt16LE(eocd + 10)
  let at = zip.readUInt32LE(eocd + 16)
  const entries: ZipEntry[] = []
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(at + 10)
    const compressed = zip.readUInt32LE(at + 20)
    const nameLength = zip.readUInt16LE(at + 28)
    const extra = zip.readUInt16LE(at + 30)
    const comment = zip.readUInt16LE(at + 32)
    const local = zip.readUInt32LE(at + 42)
    const name = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8')
    const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28)
    const data = zip.subarray(dataAt, dataAt + compressed)
    entries.push({ name, method, data: method === 0 ? Buffer.from(data) : inflateRawSync(data) })
    at += 46 + nameLength + extra + comment
  }
  return entries
}

/** A conversion job as the API shows it, as far as the conversion tests read it. */
export interface JobView {
  readonly jobID: string
  readonly status: string
  readonly options: { readonly pages: string | null; readonly [option: string]: unknown }
  readonly result: { readonly url: string; readonly type: string; readonly name: string; readonly pages: number } | null
  readonly error: { readonly code: string } | null
}

/**
 * runJob submits a job (a multipart form: its document(s) and fields), waits for its end, and
 * gives its view and, when it succeeded, its result downloaded (the answer itself).
 */
export async function runJob(app: { url: string; key: string }, form: FormData): Promise<{ view: JobView; result: Response | null }> {
  const headers = { 'x-api-key': app.key }
  const submitted = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers, body: form })
  if (submitted.status !== 202) throw new Error(`job refused: ${submitted.status} ${await submitted.text()}`)
  const { jobID } = (await submitted.json()) as { jobID: string }
  let view: JobView | null = null
  await waitFor(
    async () => {
      view = (await (await fetch(`${app.url}/converter/jobs/${jobID}`, { headers })).json()) as JobView
      return view.status !== 'queued' && view.status !== 'running'
    },
    60_000,
    `job ${jobID} to end`,
  )
  const done = view! as JobView
  // The result's URL is on the configured base URL: the same path on the test's listener.
  const result = done.result === null ? null : await fetch(app.url + new URL(done.result.url).pathname, { headers })
  return { view: done, result }
}
