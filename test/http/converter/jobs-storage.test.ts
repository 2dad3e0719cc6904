/**
 * Queued documents count against the account's job storage (JOB_STORAGE_PER_ACCOUNT_MB), as
 * results do: decided in the store step that writes the document, so parallel submissions never
 * pass it, on SQLite and on PostgreSQL. Cancelled jobs give their room back at once, and the
 * SQLite file gives its pages back to the disk (incremental vacuum) rather than keeping its size.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { startApp, tempDir } from '../../support/helper.ts'
import { createDatabase, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { randomImagePages } from '../../support/hostile.ts'

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]
const MiB = 1048576

for (const [name, env, skip] of stores) {
  test(`${name}: parallel submissions of queued documents stop at the account's job storage, and cancelling gives the room back`, {
    skip,
    timeout: 120_000,
  }, async (t: TestContext) => {
    const dataDir = tempDir(t)
    // No job runs on this node: every accepted document stays queued. 4 MiB of storage, documents of about 1.2 MB, all uploaded at once.
    const app = await startApp(t, {
      DATA_DIR: dataDir,
      JOB_WORKERS: '0',
      JOB_STORAGE_PER_ACCOUNT_MB: '4',
      JOB_MAX_ACTIVE_PER_ACCOUNT: '100',
      JOB_UPLOADS_AT_ONCE: '16',
      JOB_UPLOADS_PER_ACCOUNT: '16',
      ...(await env(t)),
    })
    const doc = randomImagePages(2)
    const submit = () => {
      const form = new FormData()
      form.append('operation', 'image')
      form.append('pdfDocument', new Blob([new Uint8Array(doc)], { type: 'application/pdf' }), 'doc.pdf')
      return fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
    }
    const file = join(dataDir, 'tessera.sqlite')
    // The database file (the write-ahead log is checkpointed into it within a second, and kept under its own limit).
    const size = () => statSync(file).size
    const sizeBefore = name === 'sqlite' ? size() : 0
    const answers = await Promise.all(Array.from({ length: 12 }, submit))
    await sleep(1000)
    const bodies = await Promise.all(answers.map(async (r) => ({ status: r.status, body: (await r.json()) as unknown })))
    const accepted = bodies.filter((b) => b.status === 202)
    const full = bodies.filter((b) => b.status === 422 && (b.body as { code: string }[])[0]!.code === 'JOB_STORAGE_FULL')
    const fit = Math.floor((4 * MiB) / doc.byteLength)
    assert.equal(accepted.length, fit, `${fit} documents of ${doc.byteLength} bytes fit in 4 MiB: ${bodies.map((b) => b.status).join()}`)
    assert.equal(full.length, 12 - fit, 'the rest are refused JOB_STORAGE_FULL')
    assert.match((full[0]!.body as { message: string }[])[0]!.message, /4194304 bytes/)

    // Cancelled, they give their room back at once: as many go in again.
    for (const { body } of accepted) {
      const res = await fetch(`${app.url}/converter/jobs/${(body as { jobID: string }).jobID}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })
      assert.equal(res.status, 200)
    }
    const again = await Promise.all(Array.from({ length: fit + 2 }, submit))
    assert.equal(again.filter((r) => r.status === 202).length, fit)
    for (const r of again) await r.arrayBuffer()
    await sleep(1000)
    if (name === 'sqlite') {
      // The file grew by the documents held; cancelled, their pages go back to the disk rather than staying in the file.
      const grown = size()
      t.diagnostic(`SQLite file ${(sizeBefore / MiB).toFixed(1)} MiB before, ${(grown / MiB).toFixed(1)} MiB with ${fit} documents queued`)
      const list = (await (await fetch(`${app.url}/converter/jobs?status=queued`, { headers: { 'x-api-key': app.key } })).json()) as {
        jobs: { jobID: string }[]
      }
      assert.equal(list.jobs.length, fit)
      for (const j of list.jobs) await fetch(`${app.url}/converter/jobs/${j.jobID}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })
      let after = size()
      for (let i = 0; i < 50 && after > sizeBefore + MiB; i++) {
        await sleep(200)
        after = size()
      }
      t.diagnostic(`${(after / MiB).toFixed(1)} MiB once they were cancelled`)
      assert.ok(grown > sizeBefore + 2 * MiB, 'the documents were in the file')
      assert.ok(
        after < sizeBefore + MiB,
        `the file gives the cancelled documents' pages back: ${(after / MiB).toFixed(1)} MiB, from ${(sizeBefore / MiB).toFixed(1)} MiB`,
      )
    }
  })
}
