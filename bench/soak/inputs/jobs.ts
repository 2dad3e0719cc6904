/**
 * The soak's inputs for conversion jobs (/converter/jobs…): submissions by upload and by URL
 * (the harness's receiver serves documents well and badly, and takes results), every operation,
 * Idempotency-Keys, hostile URLs, metadata and documents; status, lists and their cursors,
 * cancels of queued, running and finished jobs, and results read whole, slowly, or hung up on.
 */
import { DOCS, fuzz } from '../documents.ts'
import type { Answer, Case, Ctx, Mode, Request, Table } from '../types.ts'
import { bodyJson, form, hostileId, json, keep, multipart, pdf, take, type Part } from './common.ts'

const fields = (f: Record<string, string>): Part[] => Object.entries(f).map(([name, value]) => ({ name, value }))
const upload = (doc: Buffer, f: Record<string, string>, headers: Record<string, string> = {}): Request => multipart([pdf(doc), ...fields(f)], headers)

/** Every account's jobs, for the cases that ask for another account's. */
const everyones: { account: number; jobID: string }[] = []

/** kept: after a submission, its job ID is kept for the status, cancel and result cases. */
function kept(ctx: Ctx, a: Answer): void {
  const jobID = bodyJson<{ jobID?: string }>(a.body)?.jobID
  if (a.status !== 202 || jobID === undefined) return
  keep(ctx.kept, 'jobs', jobID, 500)
  everyones.push({ account: ctx.account.index, jobID })
  if (everyones.length > 500) everyones.shift()
}

const submit = (name: string, kind: Case['kind'], make: Case['make'], extra: Partial<Case> = {}): Case => ({ name, kind, make, after: kept, ...extra })

/**
 * submitted submits a job a case needs and gives its ID. A throttle (429) or a documented 503 is waited out as its Retry-After asks,
 * three times at most: the first load account is on the default plan, so that its throttle answers under load, and a case that needs a
 * job must still be made.
 */
async function submitted(ctx: Ctx, request: Request): Promise<string> {
  for (let tries = 0; ; tries++) {
    const a = await ctx.call('submitConversionJob', request)
    const jobID = bodyJson<{ jobID?: string }>(a.body)?.jobID
    if (a.status === 202 && jobID !== undefined) return jobID
    const wait = Number(a.headers['retry-after'])
    if (tries < 3 && (a.status === 429 || a.status === 503) && Number.isFinite(wait)) {
      await new Promise((r) => setTimeout(r, Math.min(wait, 30) * 1000))
      continue
    }
    throw new Error(`submitConversionJob answered ${a.status} ${bodyJson<{ code?: string }>(a.body)?.code ?? ''}`.trim())
  }
}

/** ended polls a job (through getConversionJob) until it ends, at most 180 s (a loaded node's queue): its status. */
async function ended(ctx: Ctx, jobID: string): Promise<string> {
  for (const until = Date.now() + 180_000; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
    const status = bodyJson<{ status?: string }>((await ctx.call('getConversionJob', { params: { jobID } })).body)?.status
    if (status !== undefined && status !== 'queued' && status !== 'running') return status
  }
  throw new Error(`job ${jobID} did not end in 180 s`)
}

/**
 * Jobs a case cancels or whose result it deletes, from the moment it picks them: a status read at that moment still says `succeeded`
 * with its result, and such a job kept for a result case would answer 410 (a CI run's soak did).
 */
const doomed = new Set<string>()
const doom = (jobID: string): string => {
  doomed.add(jobID)
  if (doomed.size > 5000) doomed.delete(doomed.values().next().value!)
  return jobID
}

/** keepSucceeded: a job seen succeeded with its result kept, once, unless a case has picked it to delete. */
function keepSucceeded(ctx: Ctx, jobID: string): void {
  if (doomed.has(jobID) || (ctx.kept.get('succeeded') ?? []).includes(jobID)) return
  keep(ctx.kept, 'succeeded', jobID, 50)
}

/** done gives a job that succeeded: one kept (none a case has picked to delete), or one submitted now and waited for. */
async function done(ctx: Ctx, doc: Buffer = DOCS.three, f: Record<string, string> = { operation: 'image', dpi: '72' }): Promise<string> {
  for (let kept = take<string>(ctx.kept, 'succeeded'); kept !== undefined; kept = take<string>(ctx.kept, 'succeeded')) {
    if (!doomed.has(kept)) return kept
  }
  const jobID = await submitted(ctx, upload(doc, f))
  const status = await ended(ctx, jobID)
  if (status !== 'succeeded') throw new Error(`job ${jobID} ended ${status}`)
  return jobID
}

const hostileJob = (c: Ctx): Request => ({ params: { jobID: hostileId(c.next()) } })
const othersJob = (c: Ctx): Request => {
  const theirs = everyones.find((j) => j.account !== c.account.index)
  return { params: { jobID: theirs?.jobID ?? 'job_00000000000000000000' } }
}
const result =
  (mode: Mode): Case['make'] =>
  async (c) => ({ params: { jobID: await done(c, DOCS.forty, { operation: 'image', dpi: '150' }) }, mode })

export const JOBS: Table = {
  submitConversionJob: [
    submit('an upload to PNG', 'valid', () => upload(DOCS.three, { operation: 'image', dpi: '72' }), { expect: [202] }),
    submit(
      'by URL, the result put to a URL, metadata (JSON)',
      'valid',
      (c) =>
        json({ operation: 'postscript', sourceUrl: `${c.receiver}/doc/three`, resultUrl: `${c.receiver}/result/ok`, metadata: { invoice: `INV-${c.next()}` } }),
      { expect: [202] },
    ),
    submit(
      'every other operation',
      'valid',
      (c) => {
        const ops: Record<string, string>[] = [
          { operation: 'text', format: 'structured' },
          { operation: 'split', every: '2' },
          { operation: 'rotate', angle: '90' },
          { operation: 'flatten' },
          { operation: 'compress', preset: 'screen' },
        ]
        return upload(DOCS.ten, ops[c.next() % ops.length]!)
      },
      { expect: [202] },
    ),
    submit('a merge', 'valid', () => multipart([pdf(DOCS.three), pdf(DOCS.one), ...fields({ operation: 'merge' })]), { expect: [202] }),
    submit('as a form, by URL', 'valid', (c) => form({ operation: 'image', format: 'tiff', sourceUrl: `${c.receiver}/doc/ten` }), { expect: [202] }),
    submit('an Idempotency-Key, some repeated, some with another body', 'boundary', (c) =>
      upload(c.next() % 3 === 0 ? DOCS.one : DOCS.three, { operation: 'image' }, { 'idempotency-key': `job-${c.account.index}-${c.next() % 20}` }),
    ),
    submit('MAX_PAGES as a job', 'boundary', () => upload(DOCS.maxPages, { operation: 'text' }), { heavy: true }),
    submit('a document that comes slowly', 'boundary', (c) => json({ operation: 'image', sourceUrl: `${c.receiver}/slow/three` })),
    submit('a result URL that fails', 'boundary', (c) =>
      json({ operation: 'image', sourceUrl: `${c.receiver}/doc/one`, resultUrl: `${c.receiver}/result/fail` }),
    ),
    submit('a document that lies about its length', 'hostile', (c) => json({ operation: 'image', sourceUrl: `${c.receiver}/lie/x` })),
    submit('a document without end', 'hostile', (c) => json({ operation: 'postscript', sourceUrl: `${c.receiver}/endless/x` }), { heavy: true }),
    submit('URLs of other schemes and shapes', 'hostile', (c) => {
      const urls = [
        'file:///etc/passwd',
        'gopher://127.0.0.1:6379/_INFO',
        'http://[::1',
        `http://x/${'a'.repeat(9000)}`,
        'http://0x7f.1/',
        'javascript:alert(1)',
      ]
      return json({ operation: 'image', sourceUrl: urls[c.next() % urls.length], resultUrl: urls[c.next() % urls.length] })
    }),
    submit('metadata nested deep, and large', 'hostile', (c) =>
      json(
        c.next() % 2
          ? `{"operation":"image","sourceUrl":"${c.receiver}/doc/one","metadata":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`
          : { operation: 'image', sourceUrl: `${c.receiver}/doc/one`, metadata: { x: 'm'.repeat(100_000) } },
      ),
    ),
    submit('an operation it does not know, options of another', 'hostile', (c) =>
      upload(DOCS.one, [{ operation: 'ocr' }, { operation: 'postscript', dpi: '72' }, {}, { operation: 'image', preset: 'screen' }][c.next() % 4]!),
    ),
    submit('both an upload and a URL; neither', 'hostile', (c) =>
      c.next() % 2 ? upload(DOCS.one, { operation: 'image', sourceUrl: `${c.receiver}/doc/one` }) : json({ operation: 'image' }),
    ),
    submit('a fuzzed document', 'hostile', (c) => {
      const seed = c.next()
      return { ...upload(fuzz(seed), { operation: c.next() % 2 ? 'image' : 'text' }), note: `fuzz seed ${seed}` }
    }),
    submit('a form bomb', 'hostile', () => upload(DOCS.formBomb, { operation: 'image' }), { heavy: true }),
    submit('a JPEG 2000 bomb to PostScript', 'hostile', () => upload(DOCS.jpxBomb, { operation: 'postscript' }), { heavy: true }),
    { name: 'hang up mid-upload', kind: 'hostile', make: () => ({ ...upload(DOCS.forty, { operation: 'image' }), mode: 'abort-upload' }) },
    submit('slow upload', 'boundary', () => ({ ...upload(DOCS.ten, { operation: 'image' }), mode: 'slow-upload' })),
    { name: 'no key', kind: 'hostile', expect: [403], make: () => upload(DOCS.one, { operation: 'image' }, { 'x-api-key': '' }) },
  ],
  listConversionJobs: [
    { name: 'newest first', kind: 'valid', expect: [200], make: () => ({}) },
    {
      name: 'by status, the next page',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const first = bodyJson<{ next?: string | null }>((await c.call('listConversionJobs', { query: 'status=succeeded&limit=2' })).body)
        return { query: `status=succeeded&limit=2${first?.next ? `&after=${encodeURIComponent(first.next)}` : ''}` }
      },
    },
    { name: 'the largest page', kind: 'boundary', expect: [200], make: () => ({ query: 'limit=100', mode: 'slow-read' }) },
    {
      name: 'limits, statuses and cursors of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({
        query: ['limit=0', 'limit=101', 'limit=1e9', 'status=all', `after=${'%ED%A0%80'.repeat(50)}`, 'after=eyJ4IjoxfQ', 'limit=-1'][c.next() % 7],
      }),
    },
    { name: 'no key', kind: 'hostile', expect: [403], make: () => ({ headers: { 'x-api-key': '' } }) },
  ],
  getConversionJob: [
    {
      name: 'a job of its own',
      kind: 'valid',
      expect: [200],
      make: (c) => {
        const jobID = take<string>(c.kept, 'jobs')
        if (jobID === undefined) throw new Error('no job kept yet')
        keep(c.kept, 'jobs', jobID, 500)
        return { params: { jobID } }
      },
      after: (c, a, r) => {
        const job = bodyJson<{ status?: string; resultGone?: boolean }>(a.body)
        if (job?.status === 'succeeded' && job.resultGone === false) keepSucceeded(c, r.params!.jobID!)
      },
    },
    { name: "another account's job", kind: 'boundary', expect: [404], make: othersJob },
    { name: 'hostile IDs', kind: 'hostile', make: hostileJob },
  ],
  cancelConversionJob: [
    {
      name: 'a job just submitted',
      kind: 'valid',
      expect: [200, 409],
      make: async (c) => ({ params: { jobID: doom(await submitted(c, upload(DOCS.forty, { operation: 'image' }))) } }),
    },
    {
      name: 'a finished job (its result deleted)',
      kind: 'valid',
      expect: [200, 409],
      make: async (c) => ({ params: { jobID: doom(await done(c)) } }),
    },
    {
      name: 'the same job twice',
      kind: 'boundary',
      make: async (c) => {
        const jobID = doom(await submitted(c, upload(DOCS.three, { operation: 'postscript' })))
        await c.call('cancelConversionJob', { params: { jobID } })
        return { params: { jobID } }
      },
    },
    { name: "another account's job", kind: 'hostile', expect: [404], make: othersJob },
    { name: 'hostile IDs', kind: 'hostile', make: hostileJob },
  ],
  getConversionJobResult: [
    { name: 'a result', kind: 'valid', expect: [200], make: async (c) => ({ params: { jobID: await done(c) } }) },
    { name: 'a result read slowly', kind: 'boundary', expect: [200], make: result('slow-read') },
    { name: 'hang up mid-download', kind: 'hostile', make: result('abort-download') },
    { name: 'a reader that stops reading', kind: 'hostile', make: result('stall') },
    {
      name: 'a job not done yet',
      kind: 'boundary',
      expect: [409, 200],
      make: async (c) => ({ params: { jobID: await submitted(c, upload(DOCS.forty, { operation: 'postscript' })) } }),
    },
    { name: "another account's job", kind: 'hostile', expect: [404], make: othersJob },
    { name: 'hostile IDs', kind: 'hostile', make: hostileJob },
  ],
}
