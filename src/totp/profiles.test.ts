import { test } from 'node:test'
import assert from 'node:assert/strict'
import { PROFILES, PROFILE_NAMES, isProfileName, profileProblems, resolveProfile, type ProfileName, type Requested } from './profiles.ts'
import { onboardSchema } from './schemas.ts'
import { render } from '../errors/catalogue.ts'
import { ALGORITHMS } from './otp.ts'

type Case = [ProfileName, Requested, 'ok' | string[]]

/** Each profile's accepted and refused combinations; a refusal lists the refused fields in order. */
const CASES: Case[] = [
  ['universal', {}, 'ok'],
  ['universal', { algorithm: 'SHA1', digits: 6, period: 30 }, 'ok'],
  ['universal', { algorithm: 'SHA256', digits: 8, period: 60 }, ['algorithm', 'tokenLength', 'tokenValidity']],
  ['google', { algorithm: 'SHA512', digits: 8 }, 'ok'],
  ['google', { algorithm: 'SHA256', digits: 6, period: 30 }, 'ok'],
  ['google', { digits: 7 }, ['tokenLength']],
  ['google', { period: 60 }, ['tokenValidity']],
  ['microsoft', {}, 'ok'],
  ['microsoft', { algorithm: 'SHA256' }, ['algorithm']],
  ['microsoft', { digits: 8, period: 60 }, ['tokenLength', 'tokenValidity']],
  ['authy', { digits: 8 }, 'ok'],
  ['authy', { digits: 7 }, ['tokenLength']],
  ['authy', { algorithm: 'SHA512', period: 60 }, ['algorithm', 'tokenValidity']],
  ['duo', {}, 'ok'],
  ['duo', { algorithm: 'SHA256', digits: 8 }, ['algorithm', 'tokenLength']],
  ['2fas', { algorithm: 'SHA256', digits: 8 }, 'ok'],
  ['2fas', { period: 60 }, ['tokenValidity']],
  ['freeotp', { algorithm: 'SHA512', digits: 8, period: 3600 }, 'ok'],
  ['freeotp', { digits: 7 }, ['tokenLength']],
  ['freeotp', { digits: 10 }, ['tokenLength']],
  ['aegis', { algorithm: 'SHA512', digits: 10, period: 15 }, 'ok'],
  ['aegis', { digits: 7, period: 3600 }, 'ok'],
  ['bitwarden', { algorithm: 'SHA256', digits: 10, period: 90 }, 'ok'],
  ['keepassxc', { algorithm: 'SHA512', digits: 9, period: 60 }, 'ok'],
  ['keepassxc', { digits: 10 }, ['tokenLength']],
  ['keepassxc', { period: 61 }, ['tokenValidity']],
  ['any', { algorithm: 'SHA256', digits: 10, period: 3600 }, 'ok'],
  ['any', { digits: 6, period: 15 }, 'ok'],
]

test("resolveProfile accepts and refuses each profile's combinations", () => {
  for (const [name, requested, expected] of CASES) {
    const outcome = resolveProfile(PROFILES[name], requested)
    const label = `${name} ${JSON.stringify(requested)}`
    if (expected === 'ok') {
      assert.equal(outcome.kind, 'ok', label)
      const defaults = PROFILES[name].defaults
      assert.deepEqual(
        outcome,
        {
          kind: 'ok',
          algorithm: requested.algorithm ?? defaults.algorithm,
          digits: requested.digits ?? defaults.digits,
          period: requested.period ?? defaults.period,
        },
        `${label}: the requested values, the profile's defaults for the rest`,
      )
    } else {
      assert.equal(outcome.kind, 'unsupported', label)
      if (outcome.kind !== 'unsupported') continue
      assert.equal(outcome.app, PROFILES[name].app)
      assert.deepEqual(
        outcome.problems.map((p) => p.field),
        expected,
        label,
      )
    }
  }
})

test('a refusal names the app, the value and what the app reads', () => {
  const refusal = resolveProfile(PROFILES.microsoft, { algorithm: 'SHA256', digits: 8 })
  assert.equal(refusal.kind, 'unsupported')
  if (refusal.kind !== 'unsupported') return
  const messages = profileProblems(refusal).map((p) => render(p.code, p.params))
  assert.deepEqual(messages, [
    'Microsoft Authenticator does not support algorithm SHA256 (it reads SHA1 only).',
    'Microsoft Authenticator does not support tokenLength 8 (it reads 6 digits only).',
  ])
  const ranges = resolveProfile(PROFILES.keepassxc, { digits: 10, period: 90 })
  assert.equal(ranges.kind, 'unsupported')
  if (ranges.kind !== 'unsupported') return
  assert.deepEqual(
    profileProblems(ranges).map((p) => render(p.code, p.params)),
    ['KeePassXC does not support tokenLength 10 (it reads 6 to 9 digits).', 'KeePassXC does not support tokenValidity 90 (it reads 15 to 60 seconds).'],
  )
  const lists = resolveProfile(PROFILES.google, { algorithm: 'SHA1', digits: 7 })
  assert.equal(lists.kind === 'unsupported' && lists.problems[0]!.supported, '6 or 8 digits')
})

test('every profile is consistent: defaults inside its own sets, within what the service accepts, with sources', () => {
  interface Field {
    minimum?: number
    maximum?: number
    default?: unknown
  }
  const body = onboardSchema.body.properties as unknown as Record<'algorithm' | 'tokenLength' | 'tokenValidity', Field>
  const service = {
    digits: { min: body.tokenLength.minimum!, max: body.tokenLength.maximum! },
    periods: { min: body.tokenValidity.minimum!, max: body.tokenValidity.maximum! },
  }
  for (const name of PROFILE_NAMES) {
    const profile = PROFILES[name]
    assert.equal(resolveProfile(profile, {}).kind, 'ok', `${name}: its defaults fit it`)
    // onboardUser's schema fills left-out parameters with SHA1/6/30 before the profile sees them.
    assert.deepEqual(profile.defaults, { algorithm: body.algorithm.default, digits: body.tokenLength.default, period: body.tokenValidity.default }, name)
    for (const a of profile.algorithms) assert.ok((ALGORITHMS as readonly string[]).includes(a), `${name}: ${a}`)
    for (const [allowed, limits] of [
      [profile.digits, service.digits],
      [profile.periods, service.periods],
    ] as const) {
      const values = 'min' in allowed ? [allowed.min, allowed.max] : allowed
      for (const v of values) assert.ok(v >= limits.min && v <= limits.max, `${name}: ${v} within the service's limits`)
    }
    if (name !== 'any') assert.ok(profile.sources.length > 0 && profile.sources.every((s) => s.startsWith('http')), `${name} has sources`)
  }
  assert.deepEqual(PROFILES.any.digits, service.digits, 'any is exactly what the service accepts')
  assert.deepEqual(PROFILES.any.periods, service.periods)
  assert.deepEqual(PROFILES.any.algorithms, [...ALGORITHMS])
})

test('profile names', () => {
  assert.equal(PROFILE_NAMES[0], 'universal')
  assert.ok(isProfileName('aegis'))
  assert.ok(!isProfileName('toString'), 'no inherited property counts as a profile')
  assert.ok(!isProfileName('Google'))
})
