import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ConfigError, loadConfig, settings } from './config.ts'

test('defaults: every setting has one, and the result is frozen', () => {
  const config = loadConfig({})
  assert.equal(config.port, 3000)
  assert.equal(config.region, 'eu')
  assert.equal(config.publicBaseUrl, 'http://localhost:3000')
  assert.equal(config.docsUrl, 'http://localhost:3000/docs')
  assert.equal(config.euBaseUrl, '', 'unset: a node must not name its own URL as the eu one')
  assert.equal(loadConfig({ EU_BASE_URL: 'https://eu.example.com/' }).euBaseUrl, 'https://eu.example.com')
  assert.throws(() => loadConfig({ EU_BASE_URL: 'ftp://eu' }), /EU_BASE_URL must be an http\(s\) URL/)
  assert.equal(config.otpMaxFailures, 5)
  assert.ok(Object.isFrozen(config))
  assert.deepEqual(Object.keys(config).sort(), Object.keys(settings).sort())
})

test('values are read, trimmed and normalised', () => {
  const config = loadConfig({ PORT: ' 8080 ', REGION: 'APAC', PUBLIC_BASE_URL: 'https://api.example.com/', TRUST_PROXY: 'yes' })
  assert.equal(config.port, 8080)
  assert.equal(config.region, 'apac')
  assert.equal(config.publicBaseUrl, 'https://api.example.com')
  assert.equal(config.docsUrl, 'https://api.example.com/docs')
  assert.equal(config.trustProxy, true)
})

test('a bad value is refused with a message naming the variable', () => {
  const bad: [Record<string, string>, RegExp][] = [
    [{ PORT: '70000' }, /^Invalid configuration: PORT must be from 0 to 65535/],
    [{ BODY_LIMIT_BYTES: '1e4' }, /BODY_LIMIT_BYTES must be a whole number/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
    [{ TRUST_PROXY: 'maybe' }, /TRUST_PROXY must be true or false/],
    [{ DOCS_URL: 'not a url' }, /DOCS_URL must be an absolute http\(s\) URL/],
    [{ PEPPER: 'x'.repeat(31) }, /PEPPER must be at least 32 characters/],
    [{ OTP_LOCK_BASE_SECONDS: '600', OTP_LOCK_MAX_SECONDS: '60' }, /OTP_LOCK_MAX_SECONDS must not be below OTP_LOCK_BASE_SECONDS/],
    [{ NODE_ENV: 'production' }, /PEPPER is required when NODE_ENV=production/],
    [{ NODE_ENV: 'production', PEPPER: 'p'.repeat(32), REGION: 'us' }, /EU_BASE_URL is required when NODE_ENV=production and REGION=us/],
  ]
  for (const [env, message] of bad) assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && message.test(e.message), JSON.stringify(env))
  assert.doesNotThrow(() => loadConfig({ NODE_ENV: 'production', PEPPER: 'p'.repeat(32), REGION: 'us', EU_BASE_URL: 'https://eu.example.com' }))
})
