/**
 * The API references (/docs of the public API, /admin/v1/docs of the admin API) as a person
 * reads them: in a real browser, found by roles and names, checked by axe, under a CSP that
 * lets nothing run.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../support/helper.ts'
import type { Page } from 'playwright-core'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { buildAdminApp } from '../../src/admin/api/app.ts'

const skip = browserSkip()

const CSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

test('the API reference at /docs: no serious or critical axe finding, a strict CSP, usable with the keyboard', { skip }, async (t) => {
  const app = await startApp(t)
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const blocked: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) blocked.push(m.text())
  })
  const res = await page.goto(`${app.url}/docs`)
  assert.equal(res?.status(), 200)
  const headers = res!.headers()
  assert.equal(headers['content-security-policy'], CSP)
  assert.equal(headers['x-content-type-options'], 'nosniff')
  assert.equal(headers['x-frame-options'], 'DENY')
  assert.deepEqual(await seriousViolations(page), [])
  assert.deepEqual(blocked, [], 'nothing on the page needs what the CSP refuses')
  // The stylesheet applied (served beside the page, under the same CSP).
  assert.equal(
    await page
      .locator('table')
      .first()
      .evaluate((e) => getComputedStyle(e).borderCollapse),
    'collapse',
  )

  await page.keyboard.press('Tab')
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the reference', 'the first stop skips the navigation')
  await page.getByRole('navigation', { name: 'Operations' }).getByRole('link', { name: 'POST /totp/verifyOTP' }).click()
  assert.match(page.url(), /#verifyOTP$/)
  const verify = page.getByRole('region', { name: 'POST /totp/verifyOTP' })
  await assert.doesNotReject(
    verify.getByRole('table', { name: 'Body fields' }).getByRole('rowheader', { name: 'token', exact: true }).waitFor({ timeout: 2000 }),
  )
  // The example request, with the document's example values, as one command over several lines.
  assert.equal(
    await verify.locator('pre').first().innerText(),
    "curl \\\n  -H 'x-api-key: YOUR_KEY' \\\n  --data-urlencode 'secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' \\\n  --data-urlencode 'token=681916' \\\n  'http://localhost:3000/totp/verifyOTP'",
  )
  const errors = page.getByRole('table', { name: 'Error codes' })
  assert.equal(await errors.getByRole('rowheader', { name: 'OTP_REUSED' }).count(), 1)
  assert.equal(await errors.getByRole('rowheader', { name: 'ADMIN_READ_ONLY' }).count(), 1, 'the public reference lists the whole catalogue')
  await page.screenshot({ path: process.env.SCREENSHOT_DIR === undefined ? `${app.dataDir}/docs.png` : `${process.env.SCREENSHOT_DIR}/docs.png` })
})

test('the reference shows what each call answers: the fields and an example answer of onboardUser, on a desktop and at 390 px, with a filter', {
  skip,
}, async (t) => {
  const app = await startApp(t)
  const browser = await openBrowser(t)
  for (const width of [1280, 390]) {
    const page = await (await browser.newContext({ viewport: { width, height: 900 } })).newPage()
    await page.goto(`${app.url}/docs`)
    const onboard = page.getByRole('region', { name: 'POST /totp/onboardUser' })
    const fields = onboard.getByRole('table', { name: 'Fields' })
    for (const name of ['secretKey', 'otpURL', 'QRCode', 'token', 'otp', 'expiresIn']) {
      assert.equal(await fields.getByRole('rowheader', { name, exact: true }).count(), 1, `${name} at ${width} px`)
    }
    assert.match(await onboard.innerText(), /The new secret, its otpauth URL, a QR code of that URL for authenticator apps, and the current code\./)
    // The example answer is the document's, and it is JSON with every field of the answer.
    const example = JSON.parse(await onboard.locator('p.example-label:has-text("Example answer") + pre').first().innerText()) as Record<string, unknown>
    assert.deepEqual(Object.keys(example).sort(), ['QRCode', 'algorithm', 'expiresIn', 'otp', 'otpURL', 'secretKey', 'token', 'tokenLength', 'tokenValidity'])
    assert.match(String(example.otpURL), /^otpauth:\/\/totp\/Acme:alice%40example\.com\?secret=/)
    const errorAnswer = JSON.parse(await onboard.locator('p.example-label:has-text("Example error answer") + pre').innerText()) as { code: string }[]
    assert.equal(errorAnswer[0]?.code, 'USER_ID_REQUIRED')
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), width, `no horizontal scrolling at ${width} px`)
    // axe at 1280 px: the test above, on the whole page (its default viewport). At 390 px the parts the narrow layout changes: the
    // header, the navigation and one operation, as every operation is the same template (the whole page took axe 100 s at each width).
    if (width === 390) {
      const parts = ['body > header', 'nav[aria-label="Operations"]', 'section.operation[data-filter^="post /totp/onboarduser "]']
      assert.deepEqual(await seriousViolations(page, parts), [], 'axe at 390 px')
    }

    // The filter (the page's own script): only the operations that match stay, in the list and on the page.
    const nav = page.getByRole('navigation', { name: 'Operations' })
    if (width === 390) {
      assert.equal(await nav.getByRole('link', { name: 'POST /totp/onboardUser' }).isVisible(), false, 'on a phone the list starts closed')
      await nav.locator('summary').click()
    }
    await nav.getByRole('searchbox', { name: 'Filter' }).fill('verify')
    assert.equal(await nav.getByRole('link', { name: 'POST /totp/verifyOTP' }).isVisible(), true)
    assert.equal(await nav.getByRole('link', { name: 'POST /totp/onboardUser' }).isVisible(), false)
    assert.equal(await onboard.isVisible(), false)
    await nav.getByRole('searchbox', { name: 'Filter' }).fill('no such operation')
    assert.equal(await nav.getByRole('status').innerText(), 'No operation matches.')
    await page.screenshot({ path: `${app.dataDir}/docs-${width}.png` })
  }
})

/**
 * methodsApart: the side navigation's links whose method label is not on the first line of its
 * path (the path wrapped below it), or is more than one line itself.
 */
function methodsApart(page: Page): Promise<string[]> {
  return page.locator('nav li[data-filter] a').evaluateAll((links) =>
    links.flatMap((a) => {
      const verb = a.querySelector('.verb')!
      const label = verb.getBoundingClientRect()
      const rest = document.createRange()
      rest.setStartAfter(verb)
      rest.setEnd(a, a.childNodes.length)
      const first = [...rest.getClientRects()].find((r) => r.width > 0)
      const oneLine = label.height < 1.5 * Number.parseFloat(getComputedStyle(verb).lineHeight)
      return first !== undefined && first.top < label.bottom && oneLine
        ? []
        : [`${a.textContent}: method at ${label.top}-${label.bottom}, path at ${first?.top}`]
    }),
  )
}

/** blankCodeLines: the lines, as rendered, of the page's examples that hold only a line continuation (`\\`) or nothing but spaces. */
function blankCodeLines(page: Page): Promise<string[]> {
  return page.locator('pre.example code').evaluateAll((codes) =>
    codes.flatMap((code) => {
      const lines = new Map<number, string>()
      const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT)
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const text = node.textContent ?? ''
        for (let i = 0; i < text.length; i++) {
          if (text[i] === '\n') continue
          const char = document.createRange()
          char.setStart(node, i)
          char.setEnd(node, i + 1)
          const box = char.getClientRects()[0]
          if (box === undefined) continue
          const top = Math.round(box.top)
          lines.set(top, (lines.get(top) ?? '') + text[i])
        }
      }
      return [...lines.values()].filter((l) => l.trim() === '' || l.trim() === '\\').map((l) => `${JSON.stringify(l)} in ${code.textContent?.slice(0, 80)}`)
    }),
  )
}

test('the reference laid out: at 1280 px no method label of the side navigation leaves its path, at 390 px no example line is a lone \\', {
  skip,
}, async (t) => {
  const app = await startApp(t)
  const browser = await openBrowser(t)
  for (const width of [1280, 390]) {
    const page = await (await browser.newContext({ viewport: { width, height: 900 } })).newPage()
    await page.goto(`${app.url}/docs`)
    const nav = page.getByRole('navigation', { name: 'Operations' })
    if (width === 390) await nav.locator('summary').click()
    assert.ok((await nav.locator('li[data-filter] a').count()) > 30)
    assert.deepEqual(await methodsApart(page), [], `methods beside their paths at ${width} px`)
    assert.ok((await page.locator('pre.example code').count()) > 100)
    assert.deepEqual(await blankCodeLines(page), [], `no line of an example is a lone \\ or blank at ${width} px`)
    // What a copy of the example gives is the command as it is: one that runs.
    const submit = page.getByRole('region', { name: 'POST /converter/jobs' })
    const command = await submit.locator('pre.example').first().innerText()
    assert.match(command, /^curl \\\n {2}-H 'x-api-key: YOUR_KEY' \\\n/)
    assert.match(command, / \\\n {2}--data-urlencode 'metadata=\{"batch":"2026-11","invoice":"INV-7"\}' \\\n/, 'an object field as JSON text')
    // The window, and the example measured above (a whole page of this length takes a loaded machine past the screenshot's timeout).
    const shots = process.env.SCREENSHOT_DIR ?? app.dataDir
    await page.screenshot({ path: `${shots}/docs-layout-${width}.png` })
    await submit
      .locator('pre.example')
      .first()
      .screenshot({ path: `${shots}/docs-layout-${width}-curl.png` })
  }
})

test("a job's error links to the error reference the server serves beside it", { skip }, async (t) => {
  const app = await startApp(t)
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  await page.goto(`${app.url}/docs`)
  const job = page.getByRole('region', { name: 'GET /converter/jobs/{jobID}' }).getByRole('table', { name: 'Fields' })
  await job.getByRole('link', { name: 'error reference' }).click()
  assert.equal(new URL(page.url()).pathname + new URL(page.url()).hash, '/docs#errors')
  assert.equal(await page.getByRole('heading', { name: 'Errors', level: 2 }).isVisible(), true)
  assert.equal(await page.getByRole('table', { name: 'Error codes' }).getByRole('rowheader', { name: 'SOURCE_FETCH_FAILED' }).count(), 1)
})

test('the admin API reference at /admin/v1/docs, on the admin listener, without a token', { skip }, async (t) => {
  const app = await startApp(t)
  const admin = await buildAdminApp({
    config: app.config,
    accounts: app.accounts,
    factors: app.factors,
    totp: app.totp,
    idempotency: app.idempotency,
    logStream: { write: () => undefined },
  })
  await admin.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => admin.close())
  const address = admin.server.address() as { port: number }
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const res = await page.goto(`http://127.0.0.1:${address.port}/admin/v1/docs`)
  assert.equal(res?.status(), 200)
  assert.equal(res!.headers()['content-security-policy'], CSP)
  assert.deepEqual(await seriousViolations(page), [])
  assert.equal(await page.getByRole('link', { name: 'POST /admin/v1/keys/{id}/roll' }).count(), 1)
  const errors = page.getByRole('table', { name: 'Error codes' })
  assert.equal(await errors.getByRole('rowheader', { name: 'ADMIN_READ_ONLY' }).count(), 1)
  assert.equal(await errors.getByRole('rowheader', { name: 'OTP_REUSED' }).count(), 0, "only the admin API's codes")
  await page.getByRole('link', { name: 'openapi.json' }).click()
  assert.match(page.url(), /\/admin\/v1\/openapi\.json$/)
})
