/**
 * Single sign-on providers through the CLI, as an operator configures them: the client secret read
 * from a file (never the command line), kept sealed in the store and never printed; a provider
 * replaced by its id; bad settings refused with the field named; removed with its links and sessions.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { admin, adminJson } from '../../support/admin-helper.ts'
import { tempDir } from '../../support/helper.ts'

const SECRET = 'the-client-secret-of-keycloak-0123456789'

test('the CLI adds, replaces, lists and removes providers; the client secret comes from a file, is kept sealed and never printed', async (t) => {
  const dir = tempDir(t)
  const secretFile = join(dir, 'keycloak-secret')
  writeFileSync(secretFile, `${SECRET}\n`)
  const account = await adminJson<{ id: string }>(dir, ['account', 'create', '--name', 'Acme'])
  const base = ['sso', 'add', 'keycloak', '--name', 'Keycloak', '--issuer', 'https://id.example.com/realms/acme/', '--client-id', 'tessera']
  const added = await adminJson<Record<string, unknown>>(dir, [
    ...base,
    '--client-secret-file',
    secretFile,
    '--domains',
    'Acme.example,acme.example,corp.example',
    '--account',
    account.id,
    '--role',
    'developer',
    '--mfa',
    'amr',
    '--password',
    'off',
  ])
  assert.deepEqual(added, {
    id: 'keycloak',
    name: 'Keycloak',
    issuer: 'https://id.example.com/realms/acme',
    clientId: 'tessera',
    clientSecret: 'set',
    domains: ['acme.example', 'corp.example'],
    joinAccountId: account.id,
    joinRole: 'developer',
    mfa: 'amr',
    passwordAllowed: false,
    redirectUri: 'http://localhost:3000/portal/sso/keycloak/callback',
    created: true,
  })
  // Sealed at rest: the store holds no plain secret.
  const db = new DatabaseSync(join(dir, 'tessera.sqlite'), { readOnly: true })
  const row = db.prepare('SELECT client_secret FROM sso_providers WHERE id = ?').get('keycloak') as { client_secret: string }
  db.close()
  assert.match(row.client_secret, /^v\d+\./)
  assert.ok(!row.client_secret.includes(SECRET))
  const listed = await admin(dir, ['sso', 'list'])
  assert.equal(listed.code, 0, listed.stderr)
  assert.ok(!listed.stdout.includes(SECRET) && !listed.stderr.includes(SECRET))
  assert.match(listed.stdout, /keycloak .*acme\.example,corp\.example/)
  // Replaced by its id: a public client now, every setting as given.
  const replaced = await adminJson<Record<string, unknown>>(dir, base)
  assert.equal(replaced.created, false)
  assert.equal(replaced.clientSecret, 'none')
  assert.deepEqual(replaced.domains, [])
  assert.equal(replaced.passwordAllowed, true)
  // Refusals name the field.
  for (const [args, words] of [
    [['sso', 'add', 'Bad Id', '--name', 'x', '--issuer', 'https://a.example', '--client-id', 'c'], /id must be/],
    [['sso', 'add', 'x', '--name', 'x', '--issuer', 'http://id.example.com', '--client-id', 'c'], /issuer must be https/],
    [['sso', 'add', 'x', '--name', 'x', '--issuer', 'https://a.example?x=1', '--client-id', 'c'], /no query/],
    [['sso', 'add', 'x', '--name', 'x', '--issuer', 'https://a.example', '--client-id', 'c', '--domains', 'not a domain'], /is not a domain name/],
    [['sso', 'add', 'x', '--name', 'x', '--issuer', 'https://a.example', '--client-id', 'c', '--mfa', 'yes'], /mfa must be one of/],
    [['sso', 'add', 'x', '--name', 'x\u202e', '--issuer', 'https://a.example', '--client-id', 'c'], /without control or bidi/],
    [
      ['sso', 'add', 'x', '--name', 'x', '--issuer', 'https://a.example', '--client-id', 'c', '--domains', 'a.example', '--account', 'acc_0000000000000000'],
      /no account/,
    ],
    [['sso', 'add', 'x', '--name', 'x', '--issuer', 'https://a.example', '--client-id', 'c', '--account', account.id], /joinAccountId needs domains/],
  ] as const) {
    const r = await admin(dir, [...args])
    assert.notEqual(r.code, 0, args.join(' '))
    assert.match(r.stderr, words, args.join(' '))
  }
  const removed = await admin(dir, ['sso', 'remove', 'keycloak'])
  assert.equal(removed.code, 0, removed.stderr)
  assert.match(removed.stdout, /Provider keycloak removed/)
  assert.deepEqual(await adminJson(dir, ['sso', 'list']), [])
  assert.notEqual((await admin(dir, ['sso', 'remove', 'keycloak'])).code, 0)
})
