/**
 * The server is launched with LAUNCH_ENV (src/launch.ts) wherever the project launches it: the
 * image's ENV and `npm start` carry each of its variables with its value, and a server that
 * `npm start` runs has them in its environment.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { LAUNCH_ENV } from '../../src/launch.ts'

const ROOT = resolve(import.meta.dirname, '../..')

test("the Dockerfile's ENV and npm start set every variable of LAUNCH_ENV to its value", () => {
  const env = readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('ENV '))
    .flatMap((line) => line.slice(4).trim().split(/\s+/))
  const start = (JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start
  for (const [name, value] of Object.entries(LAUNCH_ENV)) {
    assert.ok(env.includes(`${name}=${value}`), `the Dockerfile sets ENV ${name}=${value}`)
    assert.match(start, new RegExp(`(^|\\s)${name}=${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s`), `npm start sets ${name}=${value}`)
  }
})
