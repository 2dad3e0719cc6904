/**
 * A real browser for tests: Debian's chromium driven by playwright-core (`.ci/run` installs
 * it), with axe-core for accessibility. Tests that need it skip with a notice when it is not
 * there, and fail instead when TESSERA_REQUIRE_SERVICES=1 (CI).
 */
import { test, type TestContext } from 'node:test'
import { existsSync } from 'node:fs'
import { chromium, type Browser, type Page } from 'playwright-core'
import { AxeBuilder } from '@axe-core/playwright'

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/** browserSkip gives the `skip` option of a browser test: false when chromium is there, a notice when not. */
export function browserSkip(): false | string {
  if (existsSync(CHROMIUM)) return false
  const notice = `needs chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`
  if (process.env.TESSERA_REQUIRE_SERVICES === '1') {
    test('required: chromium is installed', () => {
      throw new Error(`TESSERA_REQUIRE_SERVICES=1 but ${notice}`)
    })
  } else {
    process.stderr.write(`# SKIPPED: ${notice}\n`)
  }
  return notice
}

/** openBrowser launches headless chromium for the test and closes it after. */
export async function openBrowser(t: TestContext): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] })
  t.after(() => browser.close())
  return browser
}

/** signInPage opens a fresh page and signs `user` in through the portal's form: it is left on the home page. */
export async function signInPage(browser: Browser, baseUrl: string, user: { readonly email: string; readonly password: string }): Promise<Page> {
  const page = await (await browser.newContext()).newPage()
  await page.goto(`${baseUrl}/portal/sign-in`)
  await page.getByLabel('Email').fill(user.email)
  await page.getByLabel('Password').fill(user.password)
  await Promise.all([page.waitForURL(/\/portal\/(home|accounts\/[^/]+\/overview)$/), page.getByRole('button', { name: 'Sign in', exact: true }).click()])
  return page
}

/** seriousViolations runs axe on the page and lists the serious and critical findings, one line each. */
export async function seriousViolations(page: Page, include: readonly string[] = []): Promise<string[]> {
  const result = await include.reduce((axe, selector) => axe.include(selector), new AxeBuilder({ page })).analyze()
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.length}×, e.g. ${v.nodes[0]?.target.join(' ')})`)
}
