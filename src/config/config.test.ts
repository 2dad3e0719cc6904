import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ConfigError, loadConfig, settings } from './config.ts'

const KEY = `1:${Buffer.alloc(32, 7).toString('base64')}`

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

test('TRUST_PROXY: false by default, true and false as before, or a list of addresses, CIDRs and range names', () => {
  assert.equal(loadConfig({}).trustProxy, false)
  for (const on of ['true', 'TRUE', '1', 'yes']) assert.equal(loadConfig({ TRUST_PROXY: on }).trustProxy, true, on)
  for (const off of ['false', '0', 'no', '']) assert.equal(loadConfig({ TRUST_PROXY: off }).trustProxy, false, off)
  const list = loadConfig({ TRUST_PROXY: ' Loopback, uniquelocal,linklocal , 10.9.9.9, 10.0.0.0/8, 2001:db8::/32, ::1, 192.0.2.1/32,' }).trustProxy
  assert.deepEqual(list, ['loopback', 'uniquelocal', 'linklocal', '10.9.9.9', '10.0.0.0/8', '2001:db8::/32', '::1', '192.0.2.1/32'])
  assert.ok(Object.isFrozen(list))
  const bad: [string, string][] = [
    ['loopback,10.0.0.300', '"10.0.0.300" is not an address'],
    ['loopback, proxy.example.com', '"proxy.example.com" is not an address'],
    ['10.0.0.0/33', '"10.0.0.0/33" has a prefix that is not a whole number from 1 to 32'],
    ['10.0.0.0/0', '"10.0.0.0/0" has a prefix that is not a whole number from 1 to 32'],
    ['2001:db8::/129', '"2001:db8::/129" has a prefix that is not a whole number from 1 to 128'],
    ['10.0.0.0/255.0.0.0', '"10.0.0.0/255.0.0.0" has a prefix'],
    ['fe80::1%eth0', '"fe80::1%eth0" a zone index'],
    ['2', '"2" is not an address'],
    ['localhost', '"localhost" is not an address'],
    [' , ', 'must be true, false, or a comma-separated list'],
  ]
  for (const [value, message] of bad)
    assert.throws(
      () => loadConfig({ TRUST_PROXY: value }),
      (e: unknown) => e instanceof ConfigError && e.message.startsWith('Invalid configuration: TRUST_PROXY must be') && e.message.includes(message),
      value,
    )
})

test('a bad value is refused with a message naming the variable', () => {
  const bad: [Record<string, string>, RegExp][] = [
    [{ PORT: '70000' }, /^Invalid configuration: PORT must be from 0 to 65535/],
    [{ BODY_LIMIT_BYTES: '1e4' }, /BODY_LIMIT_BYTES must be a whole number/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
    [{ TRUST_PROXY: 'maybe' }, /TRUST_PROXY must be true, false, or a comma-separated list .*: "maybe" is not an address/],
    [{ DOCS_URL: 'not a url' }, /DOCS_URL must be an absolute http\(s\) URL/],
    [{ PEPPER: 'x'.repeat(31) }, /PEPPER must be at least 32 characters/],
    [{ METRICS_TOKEN: 'short' }, /METRICS_TOKEN must be at least 32 characters, without spaces$/],
    [{ METRICS_TOKEN: `${'t'.repeat(32)} x` }, /METRICS_TOKEN must be at least 32 characters, without spaces$/],
    [{ OTP_LOCK_BASE_SECONDS: '600', OTP_LOCK_MAX_SECONDS: '60' }, /OTP_LOCK_MAX_SECONDS must not be below OTP_LOCK_BASE_SECONDS/],
    [{ NODE_ENV: 'production' }, /PEPPER is required when NODE_ENV=production/],
    [{ NODE_ENV: 'production', PEPPER: 'p'.repeat(32), REGION: 'us' }, /EU_BASE_URL is required when NODE_ENV=production and REGION=us/],
    [{ NODE_ENV: 'production', PEPPER: 'p'.repeat(32), SMTP_URL: 'smtp://smtp.example.com' }, /ENCRYPTION_KEYS is required when NODE_ENV=production$/],
    [{ ENCRYPTION_KEYS: '1:c2hvcnQ=' }, /^Invalid configuration: ENCRYPTION_KEYS is invalid: the key of version 1 is 5 bytes; it must be 32/],
    [{ ENCRYPTION_KEYS: 'abc' }, /ENCRYPTION_KEYS is invalid: item 1 is not version:base64key/],
    [{ ENCRYPTION_KEYS: `${KEY},${KEY}` }, /ENCRYPTION_KEYS is invalid: version 1 appears twice/],
    [{ ENCRYPTION_KEYS: KEY, ENCRYPTION_ACTIVE_VERSION: '2' }, /ENCRYPTION_ACTIVE_VERSION must be one of the versions in ENCRYPTION_KEYS \(1\)/],
  ]
  for (const [env, message] of bad)
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && message.test(e.message),
      JSON.stringify(env),
    )
  assert.doesNotThrow(() =>
    loadConfig({
      NODE_ENV: 'production',
      PEPPER: 'p'.repeat(32),
      REGION: 'us',
      EU_BASE_URL: 'https://eu.example.com',
      SMTP_URL: 'smtp://smtp.example.com',
      ENCRYPTION_KEYS: KEY,
    }),
  )
})

test('portal settings: defaults', () => {
  const config = loadConfig({})
  assert.equal(config.portalEnabled, true)
  assert.equal(config.signupMode, 'open')
  assert.equal(config.subscriptionApproval, 'auto')
  assert.deepEqual(config.regionUrls, { eu: 'http://localhost:3000' }, "this node's region at PUBLIC_BASE_URL")
  assert.ok(Object.isFrozen(config.regionUrls))
  assert.deepEqual(loadConfig({ REGION: 'US', PUBLIC_BASE_URL: 'https://us.example.com/' }).regionUrls, { us: 'https://us.example.com' })
  assert.equal(config.smtpUrl, '')
  assert.equal(config.mailFrom, 'Tessera <no-reply@localhost>')
  assert.equal(config.sessionTtlHours, 168)
  assert.equal(config.portalSecureCookies, false, 'auto, and PUBLIC_BASE_URL is http')
})

test('portal settings: values are read', () => {
  const config = loadConfig({
    PORTAL_ENABLED: 'false',
    SIGNUP_MODE: 'Approval',
    SUBSCRIPTION_APPROVAL: 'operator',
    REGION_URLS: ' eu=https://eu.example.com/ , US=https://us.example.com,apac=http://10.0.0.3:3000',
    SMTP_URL: 'smtps://user:pass@smtp.example.com:465',
    MAIL_FROM: 'Zoë Ops <ops@example.com>',
    SESSION_TTL_HOURS: '12',
  })
  assert.equal(config.portalEnabled, false)
  assert.equal(config.signupMode, 'approval')
  assert.equal(config.subscriptionApproval, 'operator')
  assert.deepEqual(config.regionUrls, { eu: 'https://eu.example.com', us: 'https://us.example.com', apac: 'http://10.0.0.3:3000' })
  assert.equal(config.smtpUrl, 'smtps://user:pass@smtp.example.com:465')
  assert.equal(config.mailFrom, 'Zoë Ops <ops@example.com>')
  assert.equal(config.sessionTtlHours, 12)
  assert.equal(loadConfig({ SMTP_URL: 'smtp://localhost:2525' }).smtpUrl, 'smtp://localhost:2525')
  assert.equal(loadConfig({ MAIL_FROM: 'no-reply@example.com' }).mailFrom, 'no-reply@example.com')
  assert.deepEqual(
    loadConfig({ REGION_URLS: 'us=https://us.example.com', PUBLIC_BASE_URL: 'https://eu.example.com' }).regionUrls,
    { eu: 'https://eu.example.com', us: 'https://us.example.com' },
    "this node's region, left out, is at PUBLIC_BASE_URL",
  )
  assert.deepEqual(
    loadConfig({ REGION_URLS: 'eu=https://portal.example.com', PUBLIC_BASE_URL: 'https://api.example.com' }).regionUrls,
    { eu: 'https://portal.example.com' },
    'and given, it is as given',
  )
  assert.ok(Object.isFrozen(loadConfig({ REGION_URLS: 'us=https://us.example.com' }).regionUrls))
})

test('PORTAL_SECURE_COOKIES: auto follows PUBLIC_BASE_URL; true and false override it', () => {
  assert.equal(loadConfig({ PUBLIC_BASE_URL: 'https://api.example.com' }).portalSecureCookies, true)
  assert.equal(loadConfig({ PUBLIC_BASE_URL: 'HTTPS://api.example.com' }).portalSecureCookies, true)
  assert.equal(loadConfig({ PUBLIC_BASE_URL: 'http://api.example.com', PORTAL_SECURE_COOKIES: 'auto' }).portalSecureCookies, false)
  assert.equal(loadConfig({ PUBLIC_BASE_URL: 'http://localhost:3000', PORTAL_SECURE_COOKIES: 'true' }).portalSecureCookies, true)
  assert.equal(loadConfig({ PUBLIC_BASE_URL: 'https://api.example.com', PORTAL_SECURE_COOKIES: 'false' }).portalSecureCookies, false)
})

test('portal settings: a bad value is refused with a message naming the variable', () => {
  const bad: [Record<string, string>, RegExp][] = [
    [{ PORTAL_ENABLED: 'perhaps' }, /PORTAL_ENABLED must be true or false/],
    [{ SIGNUP_MODE: 'invite' }, /SIGNUP_MODE must be one of open, approval, closed/],
    [{ SUBSCRIPTION_APPROVAL: 'manual' }, /SUBSCRIPTION_APPROVAL must be one of auto, operator/],
    [{ REGION_URLS: 'eu=https://a.example.com,eu=https://b.example.com' }, /REGION_URLS names the region eu twice/],
    [{ REGION_URLS: 'mars=https://a.example.com' }, /REGION_URLS names an unknown region "mars"/],
    [{ REGION_URLS: 'eu=ftp://a.example.com' }, /REGION_URLS must give an http\(s\) URL for eu/],
    [{ REGION_URLS: 'eu=not-a-url' }, /REGION_URLS must give an absolute http\(s\) URL for eu/],
    [{ REGION_URLS: 'https://a.example.com' }, /REGION_URLS must be a list like/],
    [{ REGION_URLS: 'eu=https://a.example.com,' }, /REGION_URLS must be a list like/],
    [{ SMTP_URL: 'http://smtp.example.com' }, /SMTP_URL must be a URL like smtps:\/\/.* \(got scheme "http:"\)/],
    [{ SMTP_URL: 'smtp.example.com:25' }, /SMTP_URL must be a URL like/],
    [{ MAIL_FROM: 'nobody' }, /MAIL_FROM must be an address like/],
    [{ MAIL_FROM: 'Ops <ops@example.com>\r\nBcc: victim@example.com' }, /MAIL_FROM must be an address like/],
    [{ SESSION_TTL_HOURS: '0' }, /SESSION_TTL_HOURS must be from 1 to/],
    [{ PORTAL_SECURE_COOKIES: 'always' }, /PORTAL_SECURE_COOKIES must be one of auto, true, false/],
  ]
  for (const [env, message] of bad)
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && message.test(e.message),
      JSON.stringify(env),
    )
})

test('an SMTP_URL refused is not echoed: it may carry a password', () => {
  assert.throws(
    () => loadConfig({ SMTP_URL: 'http://user:s3cret@smtp.example.com' }),
    (e: unknown) => e instanceof ConfigError && !e.message.includes('s3cret'),
  )
})

test('production: a portal that takes sign-ups needs SMTP_URL', () => {
  const prod = { NODE_ENV: 'production', PEPPER: 'p'.repeat(32), ENCRYPTION_KEYS: KEY }
  for (const mode of ['open', 'approval']) {
    assert.throws(
      () => loadConfig({ ...prod, SIGNUP_MODE: mode }),
      (e: unknown) =>
        e instanceof ConfigError &&
        new RegExp(`^Invalid configuration: SMTP_URL is required when NODE_ENV=production, PORTAL_ENABLED=true and SIGNUP_MODE=${mode}`).test(e.message),
      mode,
    )
  }
  assert.doesNotThrow(() => loadConfig({ ...prod, SMTP_URL: 'smtp://smtp.example.com:587' }))
  assert.doesNotThrow(() => loadConfig({ ...prod, SIGNUP_MODE: 'closed' }), 'no sign-up, no email needed to start')
  assert.doesNotThrow(() => loadConfig({ ...prod, PORTAL_ENABLED: 'false' }))
  assert.doesNotThrow(() => loadConfig({ SIGNUP_MODE: 'open' }), 'development prints the links instead')
})

test('portal sign-in throttle: defaults, values, and a delay cap below its base is refused', () => {
  const config = loadConfig({})
  assert.deepEqual([config.signinMaxFailures, config.signinIpMaxFailures, config.signinLockBaseSeconds, config.signinLockMaxSeconds], [5, 50, 1, 900])
  const set = loadConfig({ SIGNIN_MAX_FAILURES: '3', SIGNIN_IP_MAX_FAILURES: '0', SIGNIN_LOCK_BASE_SECONDS: '2', SIGNIN_LOCK_MAX_SECONDS: '60' })
  assert.deepEqual(
    [set.signinMaxFailures, set.signinIpMaxFailures, set.signinLockBaseSeconds, set.signinLockMaxSeconds],
    [3, 0, 2, 60],
    '0: no limit per address',
  )
  const bad: [Record<string, string>, RegExp][] = [
    [{ SIGNIN_MAX_FAILURES: '0' }, /SIGNIN_MAX_FAILURES must be from 1 to 100/],
    [{ SIGNIN_IP_MAX_FAILURES: '-1' }, /SIGNIN_IP_MAX_FAILURES must be a whole number/],
    [{ SIGNIN_LOCK_BASE_SECONDS: '0' }, /SIGNIN_LOCK_BASE_SECONDS must be from 1 to 86400/],
    [{ SIGNIN_LOCK_BASE_SECONDS: '60', SIGNIN_LOCK_MAX_SECONDS: '30' }, /SIGNIN_LOCK_MAX_SECONDS must not be below SIGNIN_LOCK_BASE_SECONDS/],
  ]
  for (const [env, message] of bad)
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && message.test(e.message),
      JSON.stringify(env),
    )
})

test('OpenTelemetry: off by default, on with an endpoint or OTEL_TRACES_EXPORTER=otlp, off again when disabled; bad values named', async () => {
  const { tracingWanted } = await import('../tracing/tracing.ts')
  const { tracesUrl } = await import('../tracing/sdk.ts')
  assert.equal(tracingWanted(loadConfig({})), false)
  assert.equal(tracingWanted(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })), true)
  assert.equal(tracingWanted(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })), true)
  assert.equal(tracingWanted(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' })), true)
  assert.equal(tracingWanted(loadConfig({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })), false)
  assert.equal(tracingWanted(loadConfig({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })), false)
  assert.equal(tracesUrl(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })), 'http://collector:4318/v1/traces')
  assert.equal(tracesUrl(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' })), 'http://localhost:4318/v1/traces')
  assert.equal(tracesUrl(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/x' })), 'https://b/x')
  assert.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-a = b=c ,' }).otelHeaders, {
    authorization: 'Bearer abc',
    'x-a': 'b=c',
  })
  assert.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /OTEL_EXPORTER_OTLP_PROTOCOL grpc is not offered/)
  assert.throws(() => loadConfig({ OTEL_TRACES_SAMPLER: 'sometimes' }), /OTEL_TRACES_SAMPLER must be one of/)
  assert.throws(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: '2' }), /OTEL_TRACES_SAMPLER_ARG/)
  assert.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }), /OTEL_EXPORTER_OTLP_ENDPOINT/)
  // A header's value may be a credential: a bad list names the pair, never the value.
  assert.throws(
    () => loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'authorization=%E0%A4%A' }),
    (e: Error) => e instanceof ConfigError && /pair 1/.test(e.message) && !e.message.includes('%E0'),
  )
  assert.throws(
    () => loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-secret' }),
    (e: Error) => /pair 1 has no valid key/.test(e.message) && !e.message.includes('secret'),
  )
})
