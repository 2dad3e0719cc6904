/**
 * Configuration: every setting is an environment variable with a default, read and
 * validated once at start-up into one frozen object. A bad value stops start-up with a
 * message that names the variable. docs/configuration.md is generated from `settings`
 * below (npm run docs), so the two cannot drift.
 */
import { isIP } from 'node:net'
import { availableParallelism } from 'node:os'
import { isRegion, REGIONS, type Region } from '../domain/regions.ts'
import { parseKeys } from '../crypto/keyring.ts'

export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Env = Record<string, string | undefined>

/** The shortest pepper accepted, from PEPPER or from the pepper file. */
export const MIN_PEPPER_LENGTH = 32

interface Setting<T> {
  readonly env: string
  readonly doc: string
  /** The default as written in the docs. */
  readonly defaultDoc: string
  readonly read: (raw: string | undefined, env: Env) => T
}

function fail(name: string, why: string): never {
  throw new ConfigError(`Invalid configuration: ${name} ${why}`)
}

/** setting reads a variable with `parse`, or gives `def` when it is unset or empty. */
function setting<T>(env: string, def: T, doc: string, parse: (raw: string) => T): Setting<T> {
  return { env, doc, defaultDoc: String(def), read: (raw) => (raw === undefined || raw === '' ? def : parse(raw)) }
}

function int(env: string, def: number, min: number, max: number, doc: string): Setting<number> {
  return setting(env, def, doc, (raw) => {
    if (!/^\d+$/.test(raw.trim())) fail(env, `must be a whole number from ${min} to ${max} (got "${raw}")`)
    const value = Number(raw.trim())
    if (value < min || value > max) fail(env, `must be from ${min} to ${max} (got ${value})`)
    return value
  })
}

function oneOf<const T extends string>(env: string, values: readonly T[], def: T, doc: string): Setting<T> {
  return setting(env, def, doc, (raw) => {
    const value = raw.trim().toLowerCase() as T
    if (!values.includes(value)) fail(env, `must be one of ${values.join(', ')} (got "${raw}")`)
    return value
  })
}

function text(env: string, def: (env: Env) => string, defaultDoc: string, doc: string): Setting<string> {
  return { env, doc, defaultDoc, read: (raw, all) => (raw === undefined || raw === '' ? def(all) : raw) }
}

function url(env: string, def: (env: Env) => string, defaultDoc: string, doc: string): Setting<string> {
  return {
    env,
    doc,
    defaultDoc,
    read: (raw, all) => {
      const value = raw === undefined || raw === '' ? def(all) : raw.trim()
      let parsed: URL
      try {
        parsed = new URL(value)
      } catch {
        fail(env, `must be an absolute http(s) URL (got "${value}")`)
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') fail(env, `must be an http(s) URL (got "${value}")`)
      return value.replace(/\/+$/, '')
    },
  }
}

/** optionalUrl reads an absolute http(s) URL that may be left unset (''). */
function optionalUrl(env: string, doc: string): Setting<string> {
  const given = url(env, () => '', 'unset', doc)
  return { ...given, read: (raw, all) => (raw === undefined || raw.trim() === '' ? '' : given.read(raw, all)) }
}

/** dbUrl reads an optional connection URL of the given scheme; the default is unset (''). */
function dbUrl(env: string, scheme: RegExp, example: string, doc: string): Setting<string> {
  return {
    env,
    doc: `${doc} Example: \`${example}\`.`,
    defaultDoc: 'unset',
    read: (raw) => {
      if (raw === undefined || raw.trim() === '') return ''
      let parsed: URL
      try {
        parsed = new URL(raw.trim())
      } catch {
        fail(env, `must be a URL like ${example}`)
      }
      if (!scheme.test(parsed.protocol)) fail(env, `must be a URL like ${example} (got scheme "${parsed.protocol}")`)
      return raw.trim()
    },
  }
}

function num(env: string, def: number, min: number, max: number, doc: string): Setting<number> {
  return setting(env, def, doc, (raw) => {
    const value = Number(raw.trim())
    if (raw.trim() === '' || !Number.isFinite(value) || value < min || value > max) fail(env, `must be a number from ${min} to ${max} (got "${raw}")`)
    return value
  })
}

function bool(env: string, def: boolean, doc: string): Setting<boolean> {
  return setting(env, def, doc, (raw) => {
    const value = raw.trim().toLowerCase()
    if (['1', 'true', 'yes'].includes(value)) return true
    if (['0', 'false', 'no'].includes(value)) return false
    fail(env, `must be true or false (got "${raw}")`)
  })
}

/** The names of ranges Fastify's trustProxy (proxy-addr) knows: 127.0.0.0/8 and ::1; 169.254.0.0/16 and fe80::/10; 10/8, 172.16/12, 192.168/16 and fc00::/7. */
export const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'] as const

/** proxyEntryProblem: why one entry of a TRUST_PROXY list is not taken, or null when it is. */
function proxyEntryProblem(entry: string): string | null {
  if ((PROXY_RANGE_NAMES as readonly string[]).includes(entry.toLowerCase())) return null
  // A zone index (fe80::1%eth0) is an address of this host's interfaces only, not of a peer proxy-addr compares.
  if (entry.includes('%')) return 'a zone index (%…) is not taken'
  const slash = entry.indexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const family = isIP(address)
  if (family === 0) return 'is not an address, a CIDR (address/prefix) or one of loopback, linklocal, uniquelocal'
  if (slash === -1) return null
  const prefix = entry.slice(slash + 1)
  const max = family === 4 ? 32 : 128
  // /0 would trust every address: that is TRUST_PROXY=true, said plainly.
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) < 1 || Number(prefix) > max) return `has a prefix that is not a whole number from 1 to ${max}`
  return null
}

/**
 * trustProxy reads TRUST_PROXY: false, true (every peer's X-Forwarded-For is believed), or a
 * comma-separated list of the proxies' addresses, CIDRs and range names, each checked here
 * (Fastify would only throw at start, naming no variable). Names are lower-cased, as proxy-addr
 * knows them.
 */
function trustProxy(env: string, doc: string): Setting<boolean | readonly string[]> {
  return setting<boolean | readonly string[]>(env, false, doc, (raw) => {
    const value = raw.trim().toLowerCase()
    if (['1', 'true', 'yes'].includes(value)) return true
    if (['0', 'false', 'no'].includes(value)) return false
    const entries = raw
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '')
    if (entries.length === 0) fail(env, `must be true, false, or a comma-separated list of addresses, CIDRs, loopback, linklocal, uniquelocal (got "${raw}")`)
    for (const entry of entries) {
      const problem = proxyEntryProblem(entry)
      if (problem !== null)
        fail(env, `must be true, false, or a comma-separated list of addresses, CIDRs, loopback, linklocal, uniquelocal: "${entry}" ${problem}`)
    }
    const names = PROXY_RANGE_NAMES as readonly string[]
    return Object.freeze(entries.map((entry) => (names.includes(entry.toLowerCase()) ? entry.toLowerCase() : entry)))
  })
}

/** encryptionKeys reads ENCRYPTION_KEYS as text, checked now (parseKeys) so a bad key stops start-up naming the variable; '' is unset. */
function encryptionKeys(env: string, doc: string): Setting<string> {
  return {
    env,
    doc,
    defaultDoc: 'generated outside production',
    read: (raw) => {
      if (raw === undefined || raw.trim() === '') return ''
      try {
        parseKeys(raw)
      } catch (error) {
        fail(env, `is invalid: ${(error as Error).message}`)
      }
      return raw.trim()
    },
  }
}

/** unsetDoc: a setting whose default (unset) the docs show as such. */
function unsetDoc<T>(given: Setting<T>): Setting<T> {
  return { ...given, defaultDoc: 'unset' }
}

/** otlpProtocol reads an OTLP protocol: `http/protobuf` or `http/json`; unset is '' (the other variable, or `http/protobuf`, decides). */
function otlpProtocol(env: string, doc: string): Setting<'' | 'http/protobuf' | 'http/json'> {
  return {
    env,
    doc,
    defaultDoc: env === 'OTEL_EXPORTER_OTLP_PROTOCOL' ? 'http/protobuf' : 'unset',
    read: (raw) => {
      const value = raw?.trim().toLowerCase() ?? ''
      if (value === '') return ''
      if (value === 'grpc') fail(env, "grpc is not offered: use http/protobuf, to the collector's OTLP/HTTP port (4318)")
      if (value !== 'http/protobuf' && value !== 'http/json') fail(env, `must be http/protobuf or http/json (got "${raw}")`)
      return value
    },
  }
}

/** otlpHeaders reads the OTEL list form `k1=v1,k2=v2` (values URL-encoded) into pairs; a bad pair names its position, never its value. */
function otlpHeaders(env: string, doc: string): Setting<Readonly<Record<string, string>>> {
  return {
    env,
    doc,
    defaultDoc: 'unset',
    read: (raw) => {
      const out: Record<string, string> = {}
      if (raw === undefined || raw.trim() === '') return Object.freeze(out)
      raw.split(',').forEach((part, i) => {
        if (part.trim() === '') return
        const at = part.indexOf('=')
        const key = at < 0 ? '' : part.slice(0, at).trim()
        if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(key)) fail(env, `must be key=value pairs separated by commas (pair ${i + 1} has no valid key)`)
        let value: string
        try {
          value = decodeURIComponent(part.slice(at + 1).trim())
        } catch {
          fail(env, `has a value that is not valid URL encoding (pair ${i + 1})`)
        }
        if (/[\r\n\0]/.test(value)) fail(env, `has a value with a line break (pair ${i + 1})`)
        out[key] = value
      })
      return Object.freeze(out)
    },
  }
}

/** An address to listen on, `host:port` (IPv6 hosts in brackets), or `off`. */
export interface Listen {
  readonly host: string
  readonly port: number
}

function adminListen(env: string, def: string, doc: string): Setting<Listen | null> {
  const parse = (raw: string): Listen | null => {
    if (raw === 'off') return null
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([\w.-]+)):(\d{1,5})$/.exec(raw)
    const port = Number(m?.[3])
    if (!m || port > 65535) fail(env, `must be host:port (such as 127.0.0.1:3001) or off (got "${raw}")`)
    return { host: m[1] ?? m[2]!, port }
  }
  return { env, doc, defaultDoc: def, read: (raw) => parse(raw === undefined || raw.trim() === '' ? def : raw.trim()) }
}

/** regionUrls reads `eu=https://…,us=…`: each region at most once, each an http(s) URL (trailing slashes dropped). */
function regionUrls(env: string, doc: string): Setting<Readonly<Partial<Record<Region, string>>>> {
  const parse = (raw: string): Readonly<Partial<Record<Region, string>>> => {
    const out: Partial<Record<Region, string>> = {}
    for (const part of raw.split(',')) {
      const m = /^\s*([a-z]+)\s*=\s*(\S+)\s*$/i.exec(part)
      if (!m) fail(env, `must be a list like eu=https://eu.example.com,us=https://us.example.com (got "${part.trim()}")`)
      const region = m[1]!.toLowerCase()
      if (!isRegion(region)) fail(env, `names an unknown region "${m[1]}" (regions: ${REGIONS.join(', ')})`)
      if (out[region] !== undefined) fail(env, `names the region ${region} twice`)
      let parsed: URL
      try {
        parsed = new URL(m[2]!)
      } catch {
        fail(env, `must give an absolute http(s) URL for ${region} (got "${m[2]}")`)
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') fail(env, `must give an http(s) URL for ${region} (got "${m[2]}")`)
      out[region] = m[2]!.replace(/\/+$/, '')
    }
    return out
  }
  return {
    env,
    doc,
    defaultDoc: '$REGION=$PUBLIC_BASE_URL',
    // This node's own region is always there: when the list leaves it out, it is PUBLIC_BASE_URL
    // (read through the settings it names, as the other defaults are).
    read: (raw, all) => {
      const given = raw === undefined || raw.trim() === '' ? {} : parse(raw)
      const own = settings.region.read(all.REGION, all)
      return Object.freeze({ [own]: settings.publicBaseUrl.read(all.PUBLIC_BASE_URL, all), ...given })
    },
  }
}

/** mailAddress reads an address, bare (`a@b.example`) or with a display name (`Name <a@b.example>`). */
function mailAddress(env: string, def: string, doc: string): Setting<string> {
  const read = setting(env, def, doc, (raw) => {
    const value = raw.trim()
    const m = /^(?:[^<>\r\n]*<([^<>\s]+)>|([^<>\s]+))$/.exec(value)
    const address = m?.[1] ?? m?.[2]
    if (address === undefined || !/^[^@\s]+@[^@\s]+$/.test(address))
      fail(env, `must be an address like "Tessera <no-reply@example.com>" or no-reply@example.com (got "${raw}")`)
    return value
  })
  // In backticks: with its space the docs would leave it bare, and Markdown takes <…> for a tag.
  return { ...read, defaultDoc: `\`${def}\`` }
}

/** secureCookies reads `auto`, `true` or `false` into whether cookies are marked Secure; `auto` follows PUBLIC_BASE_URL. */
function secureCookies(env: string, doc: string): Setting<boolean> {
  const choice = oneOf(env, ['auto', 'true', 'false'], 'auto', doc)
  return {
    ...choice,
    read: (raw, all) => {
      const value = choice.read(raw, all)
      return value === 'auto' ? new URL(settings.publicBaseUrl.read(all.PUBLIC_BASE_URL, all)).protocol === 'https:' : value === 'true'
    },
  }
}

const portOf = (env: Env) => env.PORT || '3000'
const publicBase = (env: Env) => (env.PUBLIC_BASE_URL || `http://localhost:${portOf(env)}`).replace(/\/+$/, '')

/** settings lists every environment variable the service reads, in the order of docs/configuration.md. */
export const settings = {
  nodeEnv: oneOf(
    'NODE_ENV',
    ['development', 'production', 'test'],
    'development',
    '`production` turns off the demo account and requires `PEPPER` and `ENCRYPTION_KEYS`, and `SMTP_URL` while the portal takes sign-ups.',
  ),
  port: int('PORT', 3000, 0, 65535, 'TCP port to listen on.'),
  host: text(
    'HOST',
    () => '127.0.0.1',
    '127.0.0.1',
    'Address to listen on; `0.0.0.0` to accept connections from other hosts (in a container, behind a proxy).',
  ),
  region: oneOf<Region>('REGION', REGIONS, 'eu', 'The region this instance serves: `eu`, `us` or `apac`. The converter group exists in `eu` only.'),
  dataDir: text(
    'DATA_DIR',
    () => './data',
    './data',
    'Folder of the embedded SQLite store (`tessera.sqlite`) and of the generated pepper and encryption-key files; created with mode 0700, the SQLite files (write-ahead log and shared memory included) and the pepper and key files 0600.',
  ),
  publicBaseUrl: url(
    'PUBLIC_BASE_URL',
    publicBase,
    'http://localhost:$PORT',
    'Base URL clients use for this instance; used in messages and in the OpenAPI document.',
  ),
  euBaseUrl: optionalUrl(
    'EU_BASE_URL',
    'Base URL of the `eu` instance, named in the 404 that `/converter/*` answers in `us` and `apac` (unset: the 404 names the region only). Required in production outside `eu`.',
  ),
  docsUrl: url('DOCS_URL', (env) => `${publicBase(env)}/docs`, '$PUBLIC_BASE_URL/docs', 'Documentation link named in error messages.'),
  logLevel: oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', 'Log level of the logs on standard output.'),
  logFormat: oneOf(
    'LOG_FORMAT',
    ['auto', 'json', 'pretty'],
    'auto',
    'Format of the logs: `json` (one JSON object a line, for a log collector), `pretty` (one readable line an entry: time, level, request id, method, path, status and time taken, through `pino-pretty`), or `auto`, which is `pretty` when `NODE_ENV=development` and standard output is a terminal, and `json` otherwise (in production, under test, and whenever the output is piped).',
  ),
  otelSdkDisabled: bool('OTEL_SDK_DISABLED', false, 'OpenTelemetry: `true` turns tracing off whatever the other `OTEL_*` variables say.'),
  otelTracesExporter: unsetDoc(
    oneOf(
      'OTEL_TRACES_EXPORTER',
      ['', 'otlp', 'none'],
      '',
      'OpenTelemetry: `otlp` sends traces over OTLP/HTTP (to `OTEL_EXPORTER_OTLP_ENDPOINT`, default `http://localhost:4318`), `none` sends none. Unset, tracing is on only when an OTLP endpoint variable is set: **off by default** (docs/operating.md, "Traces").',
    ),
  ),
  otelEndpoint: optionalUrl(
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    "OpenTelemetry: the collector's OTLP/HTTP base URL; traces go to its `/v1/traces` (such as `http://otel-collector:4318`). Setting it turns tracing on.",
  ),
  otelTracesEndpoint: optionalUrl(
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    'OpenTelemetry: the full URL traces are sent to, taking precedence over `OTEL_EXPORTER_OTLP_ENDPOINT` (nothing is appended). Setting it turns tracing on.',
  ),
  otelProtocol: otlpProtocol(
    'OTEL_EXPORTER_OTLP_PROTOCOL',
    "OpenTelemetry: the OTLP encoding, `http/protobuf` or `http/json` (both over HTTP; `grpc` is not offered: point it at the collector's HTTP port, 4318).",
  ),
  otelTracesProtocol: otlpProtocol('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OpenTelemetry: as `OTEL_EXPORTER_OTLP_PROTOCOL`, for traces; takes precedence.'),
  otelHeaders: otlpHeaders(
    'OTEL_EXPORTER_OTLP_HEADERS',
    "OpenTelemetry: headers sent with each export, `key=value` pairs separated by commas, values URL-encoded (such as `authorization=Bearer%20abc`). They may hold a collector's credentials: never logged.",
  ),
  otelTracesHeaders: otlpHeaders(
    'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
    'OpenTelemetry: as `OTEL_EXPORTER_OTLP_HEADERS`, for traces; a name given in both takes this value.',
  ),
  otelTimeoutMs: int('OTEL_EXPORTER_OTLP_TIMEOUT', 10000, 100, 600000, 'OpenTelemetry: longest one export to the collector may take, in milliseconds.'),
  otelCompression: oneOf('OTEL_EXPORTER_OTLP_COMPRESSION', ['none', 'gzip'], 'none', 'OpenTelemetry: `gzip` compresses each export.'),
  otelServiceName: text(
    'OTEL_SERVICE_NAME',
    () => '',
    'unset',
    'OpenTelemetry: the `service.name` of every span; unset, the one `OTEL_RESOURCE_ATTRIBUTES` gives, else `tessera`.',
  ),
  otelResourceAttributes: otlpHeaders(
    'OTEL_RESOURCE_ATTRIBUTES',
    "OpenTelemetry: more attributes of this node's resource, `key=value` pairs separated by commas (such as `deployment.environment.name=production`); `service.name` here counts unless `OTEL_SERVICE_NAME` is set.",
  ),
  otelSampler: oneOf(
    'OTEL_TRACES_SAMPLER',
    ['parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio', 'always_on', 'always_off', 'traceidratio'],
    'parentbased_always_on',
    "OpenTelemetry: which requests are traced. `parentbased_*` follows the caller's `traceparent` when there is one (sampled or not) and applies the rest of the name otherwise; `traceidratio` keeps the share `OTEL_TRACES_SAMPLER_ARG` of traces. What each costs: docs/performance.md.",
  ),
  otelSamplerArg: num('OTEL_TRACES_SAMPLER_ARG', 1, 0, 1, 'OpenTelemetry: the share of traces kept by the `*traceidratio` samplers, from 0 to 1.'),
  otelBspScheduleDelayMs: int('OTEL_BSP_SCHEDULE_DELAY', 5000, 0, 600000, 'OpenTelemetry: most milliseconds between two exports of finished spans.'),
  otelBspExportTimeoutMs: int(
    'OTEL_BSP_EXPORT_TIMEOUT',
    30000,
    100,
    600000,
    'OpenTelemetry: longest a batch export may take before it is dropped, in milliseconds.',
  ),
  otelBspMaxQueueSize: int(
    'OTEL_BSP_MAX_QUEUE_SIZE',
    2048,
    1,
    1_000_000,
    "OpenTelemetry: most finished spans held for export; past it new spans are dropped (the log says how many, at warn), so a collector that is down costs the node at most this many spans of memory: 1 to 2 KB of heap each (a request's span with its seven attributes, measured queued), a few MB at the default.",
  ),
  otelBspMaxExportBatchSize: int('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, 1_000_000, 'OpenTelemetry: most spans in one export.'),
  databaseUrl: dbUrl(
    'DATABASE_URL',
    /^postgres(ql)?:$/,
    'postgres://user:pass@host:5432/db',
    'PostgreSQL for accounts, keys, subscriptions, plans, onboarding records and usage, shared by every node of a region; unset: the embedded SQLite store in `DATA_DIR`.',
  ),
  databasePoolSize: int('DATABASE_POOL_SIZE', 10, 1, 1000, 'Connections each node keeps to PostgreSQL at most.'),
  redisUrl: dbUrl(
    'REDIS_URL',
    /^rediss?:$/,
    'redis://host:6379',
    'Redis for what nodes share per call: verification state (replay protection, lockouts), the throttle and quota counters, and the key-revocation signal. Unset: kept by the store (SQLite or PostgreSQL) and limits counted per node.',
  ),
  redisCluster: bool(
    'REDIS_CLUSTER',
    false,
    "`REDIS_URL` names a node of a Redis Cluster (any primary; the client learns the others and follows slots as they move). Every script touches one hash slot; attempt limits take each counter with a script of its own there (docs/deploy.md). Off: one Redis (a primary, with replicas or Sentinel's failover in front as you like).",
  ),
  redisPrefix: {
    ...text(
      'REDIS_PREFIX',
      () => 'tessera:',
      'tessera:',
      "Prefix of every Redis key and channel, so that deployments (regions) can share one Redis. No `{` or `}`: they would make the hash tag, which keeps an account's keys in one cluster slot.",
    ),
    read: (raw: string | undefined) => {
      const value = raw === undefined || raw === '' ? 'tessera:' : raw
      if (/[{}]/.test(value)) fail('REDIS_PREFIX', `must not contain { or } (got "${value}")`)
      return value
    },
  },
  storeTimeoutMs: int('STORE_TIMEOUT_MS', 2000, 100, 60000, 'Longest wait for PostgreSQL or Redis (connection or command) before the call answers 503.'),
  planRate: num(
    'PLAN_RATE',
    100,
    0,
    1e6,
    'Default plan: steady calls per second an account may make (token bucket refill); 0 turns the throttle off. `npm run admin -- plan set` gives an account its own plan.',
  ),
  planBurst: int('PLAN_BURST', 200, 1, 1e9, 'Default plan: calls an account may make at once (bucket size).'),
  planQuota: int(
    'PLAN_QUOTA',
    0,
    0,
    1e12,
    "Default plan: units per quota period (a call costs its group's weight, `PLAN_WEIGHT_*`); 0 means no quota. Renda.io's free plan is 50 a month.",
  ),
  planPeriod: oneOf('PLAN_PERIOD', ['day', 'month'], 'month', 'Default plan: the quota window, a UTC calendar `day` or `month`.'),
  planWeightTotp: int('PLAN_WEIGHT_TOTP', 2, 0, 1000000, 'Default plan: units one call of the TOTP group costs against the quota (Renda.io: 2).'),
  planWeightConverter: int(
    'PLAN_WEIGHT_CONVERTER',
    1,
    0,
    1000000,
    'Default plan: units one call of the conversion group costs against the quota (Renda.io: 1).',
  ),
  usageFlushMs: int(
    'USAGE_FLUSH_MS',
    2000,
    100,
    600000,
    'How often each node adds its counts of admitted calls, and of refused calls with a known key, to the store (and at shutdown); `npm run admin -- usage` and the portal are this much behind at most.',
  ),
  pepper: text(
    'PEPPER',
    () => '',
    'generated outside production',
    'Server secret (at least 32 characters) that keys the HMAC of API keys and of TOTP secret fingerprints. Outside production it is generated once into `DATA_DIR/pepper` when unset; a pepper file of fewer than 32 characters stops start-up, naming the file. Changing it invalidates every API key.',
  ),
  encryptionKeys: encryptionKeys(
    'ENCRYPTION_KEYS',
    'Key-encryption keys of the secrets the service keeps (managed TOTP factors, webhook signing secrets): comma-separated `version:base64key` items, each key 32 bytes (`npm run admin -- encryption generate` makes the next one). The highest version (or `ENCRYPTION_ACTIVE_VERSION`) seals; every version listed opens. Outside production a key is generated once into `DATA_DIR/encryption-keys` when unset; required in production. Rotation: docs/operating.md, "Encryption keys".',
  ),
  encryptionActiveVersion: int(
    'ENCRYPTION_ACTIVE_VERSION',
    0,
    0,
    999999999,
    'The key version that seals new values; 0: the highest one in `ENCRYPTION_KEYS`. Pin it to the old version while a new key reaches every node, then unpin.',
  ),
  metricsToken: text(
    'METRICS_TOKEN',
    () => '',
    'unset',
    'Bearer token (at least 32 characters) for `GET /metrics`: set, the public port serves the metrics to a scrape that presents it, and so does the admin listener; unset, only the admin listener serves them, openly (it is a private address).',
  ),
  metricsPerAccount: bool(
    'METRICS_PER_ACCOUNT',
    false,
    'Add `tessera_account_requests_total{account_id, group, status_class}` to the metrics: one series per account, group and class, so it multiplies series by the accounts; account IDs only, never names.',
  ),
  adminListen: adminListen(
    'ADMIN_LISTEN',
    '127.0.0.1:3001',
    'Where the admin API listens, `host:port`, or `off`. Keep it on a private address: it answers only to admin tokens (`npm run admin -- admin token create`), but it is the door to every account.',
  ),
  auditRetentionDays: int(
    'AUDIT_RETENTION_DAYS',
    400,
    1,
    36500,
    'Audit events older than this many days are deleted (daily); no door can change or delete them before.',
  ),
  trustProxy: trustProxy(
    'TRUST_PROXY',
    "Whose `X-Forwarded-For` (and `X-Forwarded-Proto`, `-Host`) is believed, and so which address the per-source limits (`SIGNIN_IP_MAX_FAILURES`, `SIGNUP_IP_MAX`, `PORTAL_MAIL_IP_MAX`) and the audit trail count as the client's. `false`: nobody's, the connection's address is the client's. A comma-separated list: the reverse proxy's own addresses, as IPv4 or IPv6 addresses, CIDRs (`10.0.0.0/8`) and the names `loopback` (127.0.0.0/8, ::1), `linklocal` (169.254.0.0/16, fe80::/10) and `uniquelocal` (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7); the header is read from the right, past the listed addresses, and the first address not listed is the client's. `true`: every peer's header is believed (kept for compatibility; a production node warns at start): never set it while clients can reach the node's port without the proxy, since such a client names any address it likes and escapes the per-source limits. compose.yaml sets `loopback,uniquelocal` and publishes the port on loopback only, compose.cluster.yaml `uniquelocal` with no node port published (docs/deploy.md).",
  ),
  bodyLimitBytes: int('BODY_LIMIT_BYTES', 16384, 1024, 1048576, 'Largest request body the TOTP group accepts; larger ones get 413.'),
  requestTimeoutMs: int(
    'REQUEST_TIMEOUT_MS',
    30000,
    100,
    600000,
    'Time a client has to send a whole request (headers and body); the connection is then closed, within a second.',
  ),
  headersTimeoutMs: int(
    'HEADERS_TIMEOUT_MS',
    10000,
    100,
    600000,
    "Time a client has to send a request's headers, from connecting (or from the start of each further request on the connection): a connection that sends nothing is closed after it, within a second. A value above `REQUEST_TIMEOUT_MS` counts as that.",
  ),
  keepAliveTimeoutMs: int(
    'KEEP_ALIVE_TIMEOUT_MS',
    72000,
    100,
    600000,
    'How long a connection may stay idle between requests before it is closed (Node adds a second of margin). Longer than the idle timeout of the load balancer in front (often 60 s), so that it never reuses a connection just closed.',
  ),
  maxConnections: int(
    'MAX_CONNECTIONS',
    500,
    2,
    1000000,
    'Most connections open at once (keep it under the file-descriptor limit, `ulimit -n`, less a hundred). At the cap, a new connection closes the oldest one that has no request in progress; it is refused only when all have one.',
  ),
  shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', 10000, 0, 600000, 'On SIGTERM/SIGINT, how long in-flight requests may take before the process exits anyway.'),
  shutdownDrainMs: int(
    'SHUTDOWN_DRAIN_MS',
    0,
    0,
    600000,
    "On SIGTERM/SIGINT, how long the node goes on serving, every answer closing its connection and `/readyz` answering 503, before it stops accepting connections (then `SHUTDOWN_TIMEOUT_MS` runs): longer than the load balancer takes to see `/readyz` fail (`compose.cluster.yaml` sets 6000 for Caddy's check every 5 s), so that no request goes to a node that no longer listens during a rolling update. 0: stop at once.",
  ),
  keyMaxPerAccount: int(
    'KEY_MAX_PER_ACCOUNT',
    100,
    1,
    100000,
    'Most active keys an account may have (a key rolled in its grace, revoked or expired does not count); one more is refused at every door (portal, admin API, CLI), decided atomically. A key in its grace stops when the key it was rolled to is rolled or revoked, so at most twice this many keys work.',
  ),
  keyEndedKeptPerAccount: int(
    'KEY_ENDED_KEPT_PER_ACCOUNT',
    1000,
    1,
    1000000,
    "Most ended keys (revoked, expired, or rolled with their grace over) an account keeps for its key list and pages; a key's creation or roll deletes, in the same store step, those that ended longest ago beyond it. Their audit events stay. An account keeps at most twice `KEY_MAX_PER_ACCOUNT` plus this many keys.",
  ),
  keyCacheTtlSeconds: int(
    'KEY_CACHE_TTL_SECONDS',
    30,
    0,
    3600,
    "How long a key lookup (and the lookup of a TOTP secret's onboarding record) is cached in process. A change made by another process (the admin CLI) is seen within `KEY_CACHE_POLL_MS` on the SQLite store, and within this TTL in any case.",
  ),
  keyCachePollMs: int(
    'KEY_CACHE_POLL_MS',
    1000,
    50,
    60000,
    'How often the key cache asks the SQLite store whether another process changed accounts, keys or subscriptions.',
  ),
  keyCacheMaxEntries: int(
    'KEY_CACHE_MAX_ENTRIES',
    10000,
    1,
    10000000,
    'Most key lookups (hits and misses) kept in the cache; as many onboarding-record lookups are kept beside them.',
  ),
  minSecretBits: int(
    'MIN_SECRET_BITS',
    80,
    80,
    4096,
    "Weakest secret `getOTP` and `verifyOTP` take, in bits. 80 (16 base32 characters) takes the secrets Renda.io issued; 128 is RFC 4226's minimum. Secrets this service issues are 160 bits whatever the setting (152 random when issued with parameters other than the defaults, see docs/guide.md).",
  ),
  otpMaxFailures: int(
    'OTP_MAX_FAILURES',
    5,
    1,
    100,
    'Failed `verifyOTP` attempts in a row for a secret before the delay starts (each attempt counts before its code is checked; a success ends the run).',
  ),
  otpLockBaseSeconds: int('OTP_LOCK_BASE_SECONDS', 60, 1, 86400, 'First delay after `OTP_MAX_FAILURES` failures; it doubles with each further failure.'),
  otpLockMaxSeconds: int('OTP_LOCK_MAX_SECONDS', 3600, 1, 604800, 'Longest delay between `verifyOTP` attempts for a secret.'),
  factorPendingSeconds: int('FACTOR_PENDING_SECONDS', 600, 30, 604800, 'How long a managed factor waits for activation (its first code) before it is gone.'),
  factorMaxPerUser: int('FACTOR_MAX_PER_USER', 10, 1, 100, 'Most managed factors (pending and active) one user may have; one more gets 409.'),
  factorsPerAccount: int(
    'FACTORS_PER_ACCOUNT',
    1_000_000,
    1,
    1_000_000_000,
    "Most managed factors (TOTP and passkeys, pending and active) one account may keep across its users: past it, creating, importing (one by one or a line of a bulk import) and registering a passkey answer 409 `FACTORS_PER_ACCOUNT`, until some are deleted (expired pending ones are dropped when it is reached). About 0.5 KB each in the store with its user's row and the indexes (measured on SQLite, a TOTP factor; a passkey keeps its credential besides), so the default is about 0.5 GB an account.",
  ),
  factorResyncSteps: int(
    'FACTOR_RESYNC_STEPS',
    20,
    1,
    1000,
    "How far a resync looks for the device's clock, in time steps either side of the server's (20 × 30 s: ten minutes).",
  ),
  factorImportPendingDays: int(
    'FACTOR_IMPORT_PENDING_DAYS',
    30,
    1,
    365,
    "How long an imported factor that waits for its user's first code (status pending) stays before it is gone: the user signs in when they next do.",
  ),
  importMaxBytes: int(
    'IMPORT_MAX_BYTES',
    64 * 1024 * 1024,
    1024,
    1024 * 1024 * 1024,
    'The most bytes of a CSV a factor import reads (the admin API, the CLI); the rest is not read, and the report says so. The admin API takes the whole CSV (up to this) before it imports, so an import holds at most this much memory while it runs.',
  ),
  factorUserLimit: int(
    'FACTOR_USER_LIMIT',
    20,
    0,
    10_000,
    "Attempts (verify, activate, resync, recover, passkey sign-in) one user of an account may make in FACTOR_LIMIT_WINDOW_SECONDS, right or wrong; one more is 429 ATTEMPTS_LIMITED and is not tried. An account's factor settings may set its own. 0: no limit.",
  ),
  factorKeyLimit: int(
    'FACTOR_KEY_LIMIT',
    50,
    0,
    1_000_000,
    "Attempts per caller-supplied `rateLimitKey` (the end user's IP, say) in FACTOR_LIMIT_WINDOW_SECONDS, across the account's users. An account's factor settings may set its own. 0: no limit.",
  ),
  factorLimitWindowSeconds: int(
    'FACTOR_LIMIT_WINDOW_SECONDS',
    60,
    1,
    86_400,
    'The window of FACTOR_USER_LIMIT and FACTOR_KEY_LIMIT, in seconds (fixed windows).',
  ),
  idempotencyWaitMs: int(
    'IDEMPOTENCY_WAIT_MS',
    10_000,
    0,
    120_000,
    'How long a request waits for the answer of an earlier one with the same Idempotency-Key that is still under way, before a 409 IDEMPOTENCY_KEY_BUSY.',
  ),
  idempotencyKeysPerAccount: int(
    'IDEMPOTENCY_KEYS_PER_ACCOUNT',
    50_000,
    1,
    10_000_000,
    'Most Idempotency-Key records one account (or admin token) keeps: each key used is kept 24 hours with its answer. Past it, a request with a new key answers 429 `IDEMPOTENCY_KEYS_PER_ACCOUNT` with Retry-After until its first record expires (expired ones do not count); requests without the header are not affected.',
  ),
  idempotencyBytesPerAccount: int(
    'IDEMPOTENCY_BYTES_PER_ACCOUNT',
    128 * 1024 * 1024,
    1024,
    1024 ** 4,
    'Most bytes of Idempotency-Key records (key, request fingerprint and sealed answer) one account (or admin token) keeps; past it, a new key is refused as past IDEMPOTENCY_KEYS_PER_ACCOUNT (the answers of requests under way when it is reached are kept).',
  ),
  passkeyChallengeSeconds: int(
    'PASSKEY_CHALLENGE_SECONDS',
    300,
    30,
    3600,
    "How long a passkey ceremony's challenge (registration or sign-in options) may be answered, once; also the browser's timeout.",
  ),
  passkeyChallengesPerUser: int(
    'PASSKEY_CHALLENGES_PER_USER',
    10,
    1,
    1000,
    'Most passkey challenges one user may have open at once: a new one ends the oldest (a flood of options calls keeps this many rows).',
  ),
  passkeyChallengesPerAccount: int(
    'PASSKEY_CHALLENGES_PER_ACCOUNT',
    10_000,
    1,
    10_000_000,
    'Most passkey challenges one account may have open at once, across its users (expired ones do not count, and go as new ones come): past it, options calls answer 429 `PASSKEY_CHALLENGES_PER_ACCOUNT` with Retry-After until the first open one expires. About 0.7 KB each in the store.',
  ),
  qrMaxSizePx: int('QR_MAX_SIZE_PX', 2048, 64, 8192, 'Largest `size` (width and height in pixels) a QR code may be drawn at.'),
  qrDefaultScale: int('QR_DEFAULT_SCALE', 4, 1, 32, 'Pixels per module when `size` is not given.'),
  qrWorkers: int(
    'QR_WORKERS',
    1,
    1,
    64,
    'Worker threads that draw large QR codes (a version-40 symbol costs about 10 ms), so that they never hold the event loop; started on first use. Small ones (about 1 ms or less) are drawn in place.',
  ),
  qrQueuePerWorker: int('QR_QUEUE_PER_WORKER', 64, 0, 10000, 'Large QR codes that may wait per QR worker; past that, 503 `QR_BUSY` with Retry-After.'),
  converterWorkers: int(
    'CONVERTER_WORKERS',
    Math.max(1, Math.min(availableParallelism(), 8)),
    1,
    64,
    'Conversion worker threads (default: the number of CPUs, at most 8). Started on the first conversion.',
  ),
  converterSplitPages: bool(
    'CONVERTER_SPLIT_PAGES',
    true,
    "Render one PNG conversion's pages on every free worker at once (each opens the document, pages are claimed one at a time and streamed in order); a conversion that arrives takes a helping worker back at its next page. Off, a conversion runs on one worker, as most servers do.",
  ),
  converterQueuePerWorker: int('CONVERTER_QUEUE_PER_WORKER', 4, 0, 1000, 'Conversions that may wait per worker; past that, 503 with Retry-After.'),
  converterMaxPerAccount: int(
    'CONVERTER_MAX_PER_ACCOUNT',
    8,
    1,
    100000,
    "Conversions one account (all its keys) may have under way at once: running, waiting and being uploaded; one more gets 429 `CONVERSIONS_PER_ACCOUNT` with Retry-After before its body is read. Waiting conversions are served in turn between accounts, fewest running first, so one account's backlog never stands before another account's conversion.",
  ),
  maxUploadBytes: int('MAX_UPLOAD_BYTES', 52428800, 1024, 1073741824, 'Largest PDF upload (50 MiB); larger ones get 413.'),
  maxPages: int('MAX_PAGES', 500, 1, 100000, 'Most pages a document may have; more gets 422.'),
  maxPageMegapixels: int(
    'MAX_PAGE_MEGAPIXELS',
    50,
    1,
    1000,
    'Largest render of one page (width × height at the requested dpi); larger gets 422 naming the dpi that fits.',
  ),
  conversionPageTimeoutMs: int(
    'CONVERSION_PAGE_TIMEOUT_MS',
    15000,
    100,
    3600000,
    "Longest one page may keep an engine busy (opening the document counts as a page), such as a page whose forms draw each other exponentially often; the conversion is then stopped with 422 `CONVERSION_PAGE_TIMEOUT` and its worker replaced. Neither engine can be stopped from inside a page: the pool watches each worker's progress.",
  ),
  conversionTimeoutMs: int(
    'CONVERSION_TIMEOUT_MS',
    60000,
    100,
    3600000,
    'Longest a conversion may run (engine time: waiting for a slow client to take output does not count, see `CLIENT_STALL_TIMEOUT_MS`); its worker is then terminated and replaced, and the client gets 422.',
  ),
  workerMaxJobs: int('WORKER_MAX_JOBS', 200, 1, 1000000, 'Jobs after which a conversion worker is replaced by a fresh one.'),
  workerMaxMemoryMb: int(
    'WORKER_MAX_MEMORY_MB',
    768,
    384,
    65536,
    "Memory (MiB) one conversion worker may use: its engines' WebAssembly memory (about 280 MiB as it starts), JS heap and scratch files. An engine is refused memory past it and its conversion stopped with 422 `CONVERSION_MEMORY_EXCEEDED`. After any job, a worker whose memory (which never shrinks) has taken half the room it had is replaced, and one that grew by over 64 MiB once idle 5 s. A page of 50 megapixels needs the default.",
  ),
  maxOutputBytes: int(
    'MAX_OUTPUT_BYTES',
    134217728,
    65536,
    2147483647,
    "Largest answer a conversion may give (128 MiB; the PNG, the zip's pages, the PostScript); larger gets 422, before anything is sent where the engine can tell. The largest PostScript of the test corpus is 25 MB.",
  ),
  clientStallTimeoutMs: int(
    'CLIENT_STALL_TIMEOUT_MS',
    30000,
    100,
    600000,
    "A client that takes no bytes of a conversion's answer for this long is dropped and its worker freed.",
  ),
  jobWorkers: int(
    'JOB_WORKERS',
    Math.max(1, Math.min(availableParallelism(), 8) - 1),
    0,
    64,
    "Conversion jobs (`/converter/jobs`) this node runs at once: at most one fewer than `CONVERTER_WORKERS` (at least 1), whatever is set, so that synchronous conversions keep a worker, and take back a worker that helps a job at its next page. Past it, up to as many again, the node runs the first job of an account that has none running anywhere, and the jobs share the workers page by page (a job gives way at its next page, after a 1 s slice, to another account's conversion): one account's long jobs never hold another's first one behind them. 0: this node runs none, it only takes submissions.",
  ),
  jobMaxPages: int('JOB_MAX_PAGES', 5000, 1, 1000000, 'Most pages the document of a conversion job may have (the synchronous limit is `MAX_PAGES`).'),
  jobTimeoutMs: int(
    'JOB_TIMEOUT_MS',
    1800000,
    1000,
    86400000,
    'Longest a conversion job may run (engine time, as `CONVERSION_TIMEOUT_MS`); it then fails with `CONVERSION_TIMEOUT`.',
  ),
  jobMaxDocumentBytes: int(
    'JOB_MAX_DOCUMENT_BYTES',
    104857600,
    1024,
    2147483647,
    'Largest document of a conversion job (100 MiB), uploaded or fetched from its `sourceUrl`; larger gets 413 `FILE_TOO_LARGE`, or fails the job when a fetch finds it so.',
  ),
  jobUploadsAtOnce: int(
    'JOB_UPLOADS_AT_ONCE',
    4,
    1,
    1000,
    'Job documents a node reads at once (each held in memory until stored, up to `JOB_MAX_DOCUMENT_BYTES`); one more gets 503 `JOB_UPLOADS_BUSY` with Retry-After before its body is read. A JSON or form submission with a `sourceUrl` takes no place.',
  ),
  jobUploadsPerAccount: int(
    'JOB_UPLOADS_PER_ACCOUNT',
    2,
    1,
    1000,
    'Job documents one account may be uploading to a node at once; one more gets 429 `JOB_UPLOADS_PER_ACCOUNT` with Retry-After before its body is read.',
  ),
  jobMaxOutputBytes: int(
    'JOB_MAX_OUTPUT_BYTES',
    536870912,
    65536,
    2147483647,
    'Largest result of a conversion job (512 MiB); a larger one fails the job with `OUTPUT_TOO_LARGE`.',
  ),
  jobResultTtlSeconds: int(
    'JOB_RESULT_TTL_SECONDS',
    86400,
    60,
    2592000,
    "How long a conversion job's result is kept for download; then it is deleted and its download answers 410.",
  ),
  jobRetentionDays: int('JOB_RETENTION_DAYS', 30, 1, 3650, "How long a finished conversion job's record (its status, never its document) is kept."),
  jobMaxActivePerAccount: int(
    'JOB_MAX_ACTIVE_PER_ACCOUNT',
    1000,
    1,
    1000000,
    'Conversion jobs one account may have queued and running at once; one more gets 429 `JOBS_PER_ACCOUNT`.',
  ),
  jobMaxRunningPerAccount: int(
    'JOB_MAX_RUNNING_PER_ACCOUNT',
    2,
    1,
    10000,
    "Conversion jobs of one account that run at once across every node; the rest wait their turn. Jobs are taken in turn between accounts, fewest running first, so one account's backlog never holds up another's first job.",
  ),
  jobStoragePerAccountMb: int(
    'JOB_STORAGE_PER_ACCOUNT_MB',
    2048,
    1,
    10485760,
    'Bytes (MiB) one account may keep of conversion jobs at once: the documents of its queued and running jobs and its kept results. A submission whose document would pass it is refused, and a job whose result would, fails, with `JOB_STORAGE_FULL` (delete results, or wait for jobs to end or results to expire).',
  ),
  jobLeaseSeconds: int(
    'JOB_LEASE_SECONDS',
    30,
    2,
    3600,
    'How long a node holds a conversion job without renewing its claim (it renews at a third of this as it works); a job whose node died is run again by another node after it.',
  ),
  jobMaxAttempts: int(
    'JOB_MAX_ATTEMPTS',
    3,
    1,
    100,
    'Times a conversion job is run when its node or worker dies on it; after that it fails with `CONVERSION_FAILED` (a poison document is never retried for ever).',
  ),
  jobPollMs: int(
    'JOB_POLL_MS',
    1000,
    10,
    60000,
    'How often a node with a free job place looks for a queued conversion job (a submission to the node itself is seen at once).',
  ),
  jobTransferTimeoutMs: int(
    'JOB_TRANSFER_TIMEOUT_MS',
    120000,
    1000,
    3600000,
    "Longest a job's document fetch from its `sourceUrl`, or its result's upload to its `resultUrl`, may take.",
  ),
  portalEnabled: bool('PORTAL_ENABLED', true, 'Serve the developer portal at `/portal` (sign-up, keys, teams, usage).'),
  signupMode: oneOf(
    'SIGNUP_MODE',
    ['open', 'approval', 'closed'],
    'open',
    'Who may sign up on the portal: `open` (anyone with a confirmed address), `approval` (an operator approves each new account) or `closed` (invitations and operators only).',
  ),
  subscriptionApproval: oneOf(
    'SUBSCRIPTION_APPROVAL',
    ['auto', 'operator'],
    'auto',
    'Whether a subscription asked for on the portal starts at once (`auto`) or waits for an operator (`operator`).',
  ),
  regionUrls: regionUrls(
    'REGION_URLS',
    "Base URL of each region's portal, as `eu=https://eu.example.com,us=https://us.example.com,apac=…` (each region at most once), for the portal's region links. This node's region, when left out, is at `PUBLIC_BASE_URL`.",
  ),
  smtpUrl: dbUrl(
    'SMTP_URL',
    /^smtps?:$/,
    'smtps://user:pass@smtp.example.com:465',
    "The SMTP server the portal's emails (address confirmation, password reset, invitations, operator notices) go through; `smtp://` upgrades with STARTTLS when offered. Unset: outside production each email's recipient, subject and text (with its link) are written to the log instead; in production the service will not start without it unless `SIGNUP_MODE=closed` or `PORTAL_ENABLED=false`.",
  ),
  mailFrom: mailAddress('MAIL_FROM', 'Tessera <no-reply@localhost>', "The sender of the portal's emails, `Name <address>` or a bare address."),
  portalAccountMaxPerUser: int(
    'PORTAL_ACCOUNT_MAX_PER_USER',
    10,
    1,
    10000,
    'Most accounts a portal user may own: creating one more on the portal is refused (accounts they are invited to do not count), decided atomically.',
  ),
  sessionTtlHours: int('SESSION_TTL_HOURS', 168, 1, 8760, 'How long a portal session lasts without use; each use extends it (sliding).'),
  ssoOperatorsRequired: bool(
    'SSO_OPERATORS_REQUIRED',
    false,
    "`true`: the operator pages open only in a session signed in through a single sign-on provider (docs/portal.md); an operator signed in with a password sees the portal as a member does, and is told to sign in through their provider. The admin API's tokens are not sessions and are not affected.",
  ),
  ssoPendingPerIp: int(
    'SSO_PENDING_PER_IP',
    20,
    1,
    100000,
    'Single sign-on requests one source address may have on their way through a provider at once (each lives 10 minutes or until its callback); past it a start is refused with 429. Counted and written in one step.',
  ),
  ssoPendingMax: int(
    'SSO_PENDING_MAX',
    10000,
    1,
    10000000,
    'Single sign-on requests on their way through a provider at once from all sources together (the whole service, across nodes: counted in the store); at it, the oldest gives way to a new one (its sign-in has to start again), so that a flood from many sources shuts no one out for long. Each is a row of about 300 bytes.',
  ),
  ssoTimeoutMs: int(
    'SSO_TIMEOUT_MS',
    5000,
    1000,
    60000,
    "How long each request to a single sign-on provider (its discovery document, keys, token endpoint, UserInfo) may take, in whole seconds' worth (rounded up), before the sign-in stops with a 503 page saying the provider did not answer.",
  ),
  portalSecureCookies: secureCookies(
    'PORTAL_SECURE_COOKIES',
    "Mark the portal's session cookie `Secure` (sent over HTTPS only): `true`, `false`, or `auto`, which does when `PUBLIC_BASE_URL` is https.",
  ),
  signinMaxFailures: int(
    'SIGNIN_MAX_FAILURES',
    5,
    1,
    100,
    'Failed portal sign-ins in a row for one email address, known or not, before each further attempt waits (each attempt counts before its password is checked, so parallel attempts get no more; a success ends the run).',
  ),
  signinIpMaxFailures: int(
    'SIGNIN_IP_MAX_FAILURES',
    50,
    0,
    1000000,
    'Failed portal sign-ins from one source address (IPv6: its /64) within a clock hour, whatever the emails, before each further attempt from it waits. A success is not counted but does not end the run. 0 turns this limit off. Behind a reverse proxy, list its addresses in `TRUST_PROXY`: otherwise every client counts as the proxy.',
  ),
  signinLockBaseSeconds: int(
    'SIGNIN_LOCK_BASE_SECONDS',
    1,
    1,
    86400,
    'First delay after `SIGNIN_MAX_FAILURES` (or `SIGNIN_IP_MAX_FAILURES`) failures; it doubles with each further failure.',
  ),
  signinLockMaxSeconds: int(
    'SIGNIN_LOCK_MAX_SECONDS',
    900,
    1,
    604800,
    'Longest delay between portal sign-in attempts for one email address or source address.',
  ),
  signupConfirmHours: int(
    'SIGNUP_CONFIRM_HOURS',
    24,
    1,
    720,
    'How long the link that confirms a new address works. A sign-up still unconfirmed past it, with no live link, is deleted by the hourly upkeep, with the account made for it (unless an operator has given that account a key, subscription or anything else).',
  ),
  signupIpMax: int(
    'SIGNUP_IP_MAX',
    10,
    0,
    1000000,
    'Portal sign-ups from one source address (IPv6: its /64) per clock hour; past it a sign-up gets 429 with `Retry-After` before any work (no password hash, no row, no email). 0 turns this limit off. Behind a reverse proxy, list its addresses in `TRUST_PROXY`: otherwise every client counts as the proxy.',
  ),
  signupMax: int(
    'SIGNUP_MAX',
    500,
    0,
    1000000,
    'Portal sign-ups from all sources together per clock hour (the whole service, across nodes when Redis is configured); past it every sign-up gets 429 until the hour ends. 0: no limit.',
  ),
  portalMailWindowSeconds: int(
    'PORTAL_MAIL_WINDOW_SECONDS',
    300,
    1,
    86400,
    'At most one password-reset email, and one sign-up email (a confirmation link, or "you already have an account"), per address per this many seconds; the page shown is the same whether an email went or not, and the last link sent keeps working.',
  ),
  portalMailIpMax: int(
    'PORTAL_MAIL_IP_MAX',
    30,
    0,
    1000000,
    'Password-reset emails that requests from one source address (IPv6: its /64) may cause per clock hour, whatever the addresses; past it no email goes, and the page is the same. 0 turns this limit off.',
  ),
  webhookAllowPrivate: bool(
    'WEBHOOK_ALLOW_PRIVATE',
    false,
    "Let webhook endpoints, and conversion jobs' `sourceUrl` and `resultUrl`, be plain `http` and reach loopback, private, link-local and other internal addresses (tests, development). Off, such a URL must be `https`, its host no local name (`localhost`, `.local`, `.internal`, `home.arpa`, a single label), and every address its name resolves to, checked at each connection, must be public; a refusal never says which address a name resolved to (docs/operating.md).",
  ),
  webhookTimeoutMs: int(
    'WEBHOOK_TIMEOUT_MS',
    10000,
    100,
    120000,
    'Longest one webhook delivery may take, from the name lookup to the end of the answer; past it the attempt fails and is retried.',
  ),
  webhookRetrySeconds: int(
    'WEBHOOK_RETRY_SECONDS',
    86400,
    1,
    2592000,
    'How long a webhook delivery is retried (from its event, or from a re-send) before it is marked failed.',
  ),
  webhookBackoffMs: int(
    'WEBHOOK_BACKOFF_MS',
    5000,
    10,
    3600000,
    'Delay before the first retry of a webhook delivery; it doubles with each further failure (with jitter, up to `WEBHOOK_BACKOFF_MAX_MS`).',
  ),
  webhookBackoffMaxMs: int('WEBHOOK_BACKOFF_MAX_MS', 3600000, 10, 86400000, 'Longest delay between two attempts of a webhook delivery.'),
  webhookPollMs: int(
    'WEBHOOK_POLL_MS',
    1000,
    10,
    600000,
    'How often each node looks for webhook deliveries that are due (a read; it claims only when there is work).',
  ),
  webhookConcurrency: int('WEBHOOK_CONCURRENCY', 8, 1, 256, 'Webhook deliveries each node sends at once.'),
  webhookPendingPerAccount: int(
    'WEBHOOK_PENDING_PER_ACCOUNT',
    100_000,
    1,
    100_000_000,
    "Most webhook deliveries one account may have pending (waiting to be sent or retried), across its endpoints: past it, an event's deliveries are not written (the event stays in the audit trail), counted in `tessera_webhook_deliveries_dropped_total` and logged at warn once an hour per account. Decided in the event's own insert. About 0.5 KB each in the store with its message and indexes, and 0.23 KB for each attempt kept (a receiver down for a day: some 30 attempts), measured on SQLite: the default is 50 MB an account, up to 0.7 GB while its receiver is down.",
  ),
  webhookMaxEndpoints: int(
    'WEBHOOK_MAX_ENDPOINTS',
    10,
    1,
    1000,
    'Most webhook endpoints an account may have; one more is refused at every door (portal, admin API), decided atomically.',
  ),
  webhookDeletedKeptPerAccount: int(
    'WEBHOOK_DELETED_KEPT_PER_ACCOUNT',
    100,
    1,
    100_000,
    "Most deleted webhook endpoints an account keeps (with their deliveries and attempts, until `WEBHOOK_LOG_DAYS`); an endpoint's deletion removes, in the same store step, those deleted longest ago beyond it, with their deliveries and attempts. Their audit events stay. An account keeps at most `WEBHOOK_MAX_ENDPOINTS` plus this many endpoint rows.",
  ),
  webhookLogDays: int(
    'WEBHOOK_LOG_DAYS',
    30,
    1,
    3650,
    'Finished webhook deliveries (delivered, failed, cancelled) and their attempts are deleted this many days after their last change.',
  ),
} as const

type Settings = typeof settings
export type Config = { readonly [K in keyof Settings]: ReturnType<Settings[K]['read']> }

/** loadConfig reads and checks every setting; it throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const out: Record<string, unknown> = {}
  for (const [key, setting] of Object.entries(settings)) {
    out[key] = (setting as Setting<unknown>).read(env[setting.env], env)
  }
  const config = out as Config
  if (config.pepper !== '' && config.pepper.length < MIN_PEPPER_LENGTH) fail('PEPPER', `must be at least ${MIN_PEPPER_LENGTH} characters long`)
  // A short token on the public port could be guessed; it is compared as a whole, never echoed.
  if (config.metricsToken !== '' && (config.metricsToken.length < 32 || /\s/.test(config.metricsToken)))
    fail('METRICS_TOKEN', 'must be at least 32 characters, without spaces')
  if (config.nodeEnv === 'production') {
    if (config.pepper === '') fail('PEPPER', 'is required when NODE_ENV=production')
    if (config.region !== 'eu' && !env.EU_BASE_URL) fail('EU_BASE_URL', `is required when NODE_ENV=production and REGION=${config.region}`)
    // Without SMTP nobody could confirm an address or reset a password: say so now, not at the first sign-up.
    if (config.portalEnabled && config.signupMode !== 'closed' && config.smtpUrl === '')
      fail(
        'SMTP_URL',
        `is required when NODE_ENV=production, PORTAL_ENABLED=true and SIGNUP_MODE=${config.signupMode} (set SMTP_URL, or SIGNUP_MODE=closed, or PORTAL_ENABLED=false)`,
      )
    // Generated keys live beside the data: a production node must be given its own (and every node the same).
    if (config.encryptionKeys === '') fail('ENCRYPTION_KEYS', 'is required when NODE_ENV=production')
  }
  if (config.encryptionActiveVersion !== 0 && config.encryptionKeys !== '' && !parseKeys(config.encryptionKeys).has(config.encryptionActiveVersion))
    fail('ENCRYPTION_ACTIVE_VERSION', `must be one of the versions in ENCRYPTION_KEYS (${[...parseKeys(config.encryptionKeys).keys()].join(', ')})`)
  if (config.otpLockMaxSeconds < config.otpLockBaseSeconds) fail('OTP_LOCK_MAX_SECONDS', 'must not be below OTP_LOCK_BASE_SECONDS')
  if (config.webhookBackoffMaxMs < config.webhookBackoffMs) fail('WEBHOOK_BACKOFF_MAX_MS', 'must not be below WEBHOOK_BACKOFF_MS')
  if (config.signinLockMaxSeconds < config.signinLockBaseSeconds) fail('SIGNIN_LOCK_MAX_SECONDS', 'must not be below SIGNIN_LOCK_BASE_SECONDS')
  return Object.freeze(config)
}
