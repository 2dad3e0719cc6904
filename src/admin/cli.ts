/**
 * The admin CLI: `npm run admin -- <command>`. It uses the server's configuration (same
 * environment variables, same store, same pepper), prints for people by default and JSON
 * with --json, exits 0 on success and non-zero with a one-line error otherwise (and 3 for an
 * import that refused a line, which its report names).
 */
import { parseArgs } from 'node:util'
import { open } from 'node:fs/promises'
import { ConfigError, loadConfig } from '../config/config.ts'
import { newKeyItem } from '../crypto/keyring.ts'
import type { Accounts } from '../services/accounts.ts'
import { SEALED_KINDS, type Encryption, type SealedKind } from '../services/encryption.ts'
import { openServices, type Services } from '../services/index.ts'
import type { Users } from '../services/users.ts'
import type { SingleSignOn } from '../services/users/sso.ts'
import type { Factors } from '../services/factors.ts'
import type { FactorSettingsPatch } from '../domain/factors.ts'
import { importCsv, type ImportSummary } from '../services/factor-import.ts'
import { isProfileName, PROFILE_NAMES } from '../totp/profiles.ts'
import { factorView } from '../totp/factors/view.ts'
import { isFailure, type Failure } from '../services/outcome.ts'
import { isRefusal, jobView, type Jobs } from '../services/jobs.ts'
import { isJobStatus, JOB_STATUSES, type ConversionJob } from '../domain/jobs.ts'
import { refusalReason } from './job-refusal.ts'
import { inviteOperator, operatorMessage } from './operator-invite.ts'
import { backupStore } from '../services/backup.ts'
import { copyStore, DEFAULT_BATCH_ROWS, verifyStore, type TableCheck } from '../services/store-copy.ts'
import { CLI, DEFAULT_ROLL_GRACE_SECONDS, type Plan } from '../domain/accounts.ts'
import { USER_STATUSES, type Role, type SsoMfa, type SsoProvider, type User, type UserStatus } from '../domain/portal.ts'
import { openMailer } from '../mail/mailer.ts'
import { signupApproved } from '../mail/templates.ts'
import type { Config } from '../config/config.ts'
import { GROUPS, REGIONS, isGroup, isRegion, type Group, type Region } from '../domain/regions.ts'
import { VERSION } from '../version.ts'

export const USAGE = `Usage: npm run admin -- <command> [options] [--json]

  account create --name NAME          create an account
  account suspend ID | activate ID    refuse or allow every call of an account
  account rename ID --name NAME
  account list [--status active|suspended] [--name TEXT] [--limit N] [--after CURSOR]
  key create --account ID [--name L] [--expires ISO-TIME] [--groups totp,converter] [--regions eu,us,apac]
                                      create an API key (shown once), optionally expiring
                                      and scoped to fewer groups or regions than the account
  key roll KEYID [--grace SECONDS]    replace a key by a new one (shown once); the old one
                                      works for the grace period (0 to 604800; default 86400,
                                      24 hours, as in the portal and the admin API); a key
                                      rolled to this one and still in its grace stops now
  key revoke KEYID                    stop a key at once (and a key rolled to it, in its grace)
  key list [--account ID]
  subscription grant  --account ID --region eu|us|apac|all --group totp|converter|all
  subscription revoke --account ID --region eu|us|apac|all --group totp|converter|all
  subscription approve --account ID --region R --group G   approve a pending request
  subscription list --account ID
  plan set --account ID [--rate R] [--burst B] [--quota Q] [--period day|month]
           [--weight-totp U] [--weight-converter U]
                                      give an account its own plan (unset flags keep
                                      their current value); rate 0 = no throttle, quota 0 =
                                      no quota; the quota counts units, a call costs its
                                      group's weight
  plan reset --account ID             back to the default plan (PLAN_* settings)
  plan show --account ID
  usage --account ID [--days N] [--by day|key|region]
                                      calls and units per UTC day (key, region) and API
                                      group, last N days (31)
  audit [--account ID] [--actor A] [--action A] [--limit N] [--after CURSOR]
                                      the audit trail, newest first
  operator invite --email E [--print-link]
                                      invite someone to be a portal operator (the first one
                                      under SIGNUP_MODE=closed): a single-use link for 7 days,
                                      emailed, or printed with --print-link (a secret: give it
                                      to them yourself); the flag is granted when they accept
  operator grant --email E             let a portal user see and act in every account
  operator revoke --email E
  operator list                       the portal's operators
  user list [--status pending|active|disabled] [--email TEXT] [--limit N] [--after CURSOR]
                                      portal users, oldest first
  user approve --email E              let a pending sign-up in (and email them)
  user disable --email E              refuse a user's sign-in and end their sessions
  user two-factor-off --email E       turn off a user's two-factor sign-in (a lost phone and lost
                                      recovery codes: check who asks first) and end their sessions
  totp-user list --account ID [--limit N] [--after CURSOR]
                                      an account's users of managed TOTP factors, by user ID
  totp-user show --account ID --user U
                                      a user's factors (never a secret), recovery codes left, lock
  totp-user unlock --account ID --user U
                                      clear a user's lockout: their next right code is taken
  totp-user import --account ID --file F|- [--application NAME] [--profile P] [--status active|pending] [--from LINE]
                                      import users' TOTP secrets from a CSV (userID, base32 secret or
                                      otpauth:// URI, label), sealed on arrival; each line's outcome as
                                      it goes (--json: one JSON line each); run it again to resume.
                                      Exits 3 when a line was refused or the file not read to its end
                                      (0: every line went in, was there already or was skipped)
  totp-user delete --account ID --user U
                                      delete a user's factors and recovery codes (a lost phone
                                      and lost codes: check who asks first); they may enrol again
  factor-settings show --account ID   an account's passkey relying party and attempt limits
  factor-settings set --account ID [--rp-id HOST] [--rp-name NAME] [--origins O1,O2]
           [--user-limit N] [--key-limit N] [--window SECONDS]
                                      change them (unset flags keep their value; "none" clears
                                      one: a limit then takes the server's default)
  jobs list ACCOUNTID [--status queued|running|succeeded|failed|cancelled] [--limit N] [--after CURSOR]
                                      an account's conversion jobs, newest first (20 a page,
                                      at most 100)
  jobs cancel ACCOUNTID JOBID         cancel a queued or running job, or delete the result a
                                      finished job keeps
  admin token create --name N --scope read|write
                                      a token for the admin API (shown once)
  admin token list
  admin token revoke ID
  sso add ID --name N --issuer URL --client-id C [--client-secret-file F|-] [--domains D1,D2]
          [--account ID [--role owner|admin|developer|viewer]] [--mfa portal|amr|provider] [--password allowed|off]
                                      add a single sign-on provider for the portal, or replace the
                                      one of that id (every setting: unset flags take their defaults);
                                      the client secret is read from a file or stdin, never the command
                                      line, and sealed (none: a public client, PKCE alone); --domains:
                                      whose addresses it may sign in (all when unset); --account: a
                                      first sign-in joins it with --role (viewer); --mfa: what stands
                                      for the portal's second factor (portal: nothing); --password off:
                                      its users and its domains' sign in through it only
  sso list                            the providers (never a secret), with the redirect URI to register
  sso remove ID                       delete a provider: its users' links go and the sessions signed
                                      in through it end
  encryption status                   key versions configured, the one that seals, and what
                                      each seals: factors, portal users' two-factor secrets (and SSO client secrets),
                                      webhook secrets, kept Idempotency-Key answers, job secrets
  encryption generate                 print a new key item (the next version) for ENCRYPTION_KEYS
  encryption rotate [--batch N]       re-seal all of those under the active key version, in
                                      batches of N (500), while the service runs; once status
                                      shows 0 under the old version, it can be removed from
                                      ENCRYPTION_KEYS
  migrate                             apply pending schema migrations
  backup FILE [--force]               copy the SQLite store to FILE while the node serves (one
                                      consistent snapshot, written under a temporary name, checked
                                      and renamed; --force replaces FILE); on PostgreSQL, use pg_dump
  store copy --to postgres://… [--force] [--batch N]
                                      copy the SQLite store (DATA_DIR) into a PostgreSQL database,
                                      every table, migrated first; stop the node before. Then both
                                      are checked: rows and a SHA-256 per table (exit 4 when one
                                      differs). Refuses a database that holds data (--force: copy
                                      into it anyway; its rows stay beside the copied ones). Cut
                                      short, run it again: it goes on from the last batch of N rows
                                      (1000) it committed
  store copy --from postgres://… [--force] [--batch N]
                                      the other way: a PostgreSQL store into the SQLite store of an
                                      empty DATA_DIR (stop the nodes first)
  store verify --against postgres://…
                                      check the SQLite store against a PostgreSQL store: rows and a
                                      SHA-256 per table (exit 4 when one differs)`

class UsageError extends Error {}
class CommandError extends Error {}

interface Output {
  json: unknown
  human: string
  /** The exit code when not 0 (the command ran, and says what went wrong in its output). */
  exitCode?: number
}

/** IMPORT_INCOMPLETE: the exit code of an import that ran but refused a line or did not read the whole file. */
export const IMPORT_INCOMPLETE = 3
/** STORE_DIFFERS: the exit code of a store copy or check that found a table not the same in both stores. */
export const STORE_DIFFERS = 4

type Flags = {
  name?: string
  account?: string
  region?: string
  group?: string
  rate?: string
  burst?: string
  quota?: string
  period?: string
  days?: string
  status?: string
  limit?: string
  after?: string
  expires?: string
  groups?: string
  regions?: string
  grace?: string
  by?: string
  actor?: string
  action?: string
  scope?: string
  'weight-totp'?: string
  'weight-converter'?: string
  email?: string
  batch?: string
  user?: string
  file?: string
  application?: string
  profile?: string
  from?: string
  to?: string
  against?: string
  json?: boolean
  'print-link'?: boolean
  force?: boolean
  'rp-id'?: string
  'rp-name'?: string
  origins?: string
  'user-limit'?: string
  'key-limit'?: string
  window?: string
  issuer?: string
  'client-id'?: string
  'client-secret-file'?: string
  domains?: string
  role?: string
  mfa?: string
  password?: string
}

const CTX = { actor: CLI }

function need(value: string | undefined, flag: string): string {
  // A flag is named as it is typed (--name); a positional argument by what it is (the key id).
  if (value === undefined || value === '') throw new UsageError(flag.includes(' ') ? `missing the ${flag}` : `missing --${flag}`)
  return value
}

function expand<T extends string>(value: string, all: readonly T[], check: (v: string) => v is T, flag: string): readonly T[] {
  if (value === 'all') return all
  if (!check(value)) throw new UsageError(`--${flag} must be one of ${all.join(', ')} or all (got "${value}")`)
  return [value]
}

function table(rows: readonly Record<string, unknown>[], columns: readonly string[]): string {
  if (rows.length === 0) return '(none)'
  const cells = rows.map((r) => columns.map((c) => String(r[c] ?? '')))
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)))
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()
  return [line(columns), ...cells.map(line)].join('\n')
}

function number(value: string | undefined, flag: string, min: number, max: number, whole: boolean): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max || (whole && !Number.isInteger(n))) {
    throw new UsageError(`--${flag} must be a ${whole ? 'whole ' : ''}number from ${min} to ${max} (got "${value}")`)
  }
  return n
}

/** ok turns a service failure into the CLI's error (exit 1, one line). */
function ok<T>(result: T | Failure): T {
  if (isFailure(result)) throw new CommandError(result.message)
  return result
}

const list = (value: string | undefined): string[] | null =>
  value === undefined
    ? null
    : value
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '')

const describePlan = (p: Plan) =>
  `rate ${p.rate === 0 ? 'unlimited' : `${p.rate}/s`}, burst ${p.burst}, quota ${p.quota === 0 ? 'none' : `${p.quota} units per ${p.period}`}, ` +
  `units per call: totp ${p.weights.totp}, converter ${p.weights.converter}`

const describeKey = (k: { expiresAt: string | null; scope: { groups: readonly string[] | null; regions: readonly string[] | null } }) =>
  [
    k.expiresAt === null ? '' : ` expiring ${k.expiresAt}`,
    k.scope.groups === null ? '' : ` for ${k.scope.groups.join(', ') || 'no group'}`,
    k.scope.regions === null ? '' : ` in ${k.scope.regions.join(', ') || 'no region'}`,
  ].join('')

async function requireAccount(accounts: Accounts, id: string): Promise<void> {
  if ((await accounts.getAccount(id)) === null) throw new CommandError(`no account ${id}`)
}

const userRow = (u: User) => ({
  id: u.id,
  email: u.email,
  status: u.status,
  confirmed: u.emailVerifiedAt === null ? 'no' : 'yes',
  operator: u.operator ? 'yes' : '',
  createdAt: u.createdAt,
})
const userJson = (u: User) => ({ id: u.id, email: u.email, status: u.status, emailVerifiedAt: u.emailVerifiedAt, operator: u.operator, createdAt: u.createdAt })

/** stderrLine: the mailer's log lines, on standard error (JSON, as the server's). */
const stderrLine = (level: string) => (fields: object, message: string) => process.stderr.write(`${JSON.stringify({ level, ...fields, msg: message })}\n`)

/** mailApproval tells an approved user they can sign in; a failure is a warning (the approval stands). */
async function mailApproval(config: Config, user: User): Promise<void> {
  const mailer = openMailer(config, { info: stderrLine('info'), warn: stderrLine('warn') })
  try {
    await mailer.send({ to: user.email, ...signupApproved({ signInUrl: `${config.publicBaseUrl}/portal/sign-in` }) })
  } catch (error) {
    process.stderr.write(`warning: ${(error as Error).message}\n`)
  } finally {
    mailer.close()
  }
}

async function runUsers(config: Config, users: Users, verb: string | undefined, flags: Flags): Promise<Output> {
  switch (verb) {
    case 'list': {
      const status = flags.status
      if (status !== undefined && !USER_STATUSES.includes(status as UserStatus))
        throw new UsageError(`--status must be one of ${USER_STATUSES.join(', ')} (got "${status}")`)
      const page = await users.admin.list({
        limit: number(flags.limit, 'limit', 1, 100_000, true) ?? 1000,
        ...(status === undefined ? {} : { status: status as UserStatus }),
        ...(flags.email === undefined ? {} : { email: flags.email }),
        ...(flags.after === undefined ? {} : { cursor: flags.after }),
      })
      const more = page.next === null ? '' : `\n(more: --after ${page.next})`
      return {
        json: { items: page.items.map(userJson), next: page.next },
        human: table(page.items.map(userRow), ['id', 'email', 'status', 'confirmed', 'operator', 'createdAt']) + more,
      }
    }
    case 'approve': {
      const { user, changed } = ok(await users.admin.decideSignUp(CTX, { email: need(flags.email, 'email') }, 'approve', { disabledToo: true }))
      if (changed) await mailApproval(config, user)
      return { json: userJson(user), human: changed ? `${user.email} is approved and may sign in (emailed)` : `${user.email} is active already` }
    }
    case 'disable': {
      const { user, changed, sessionsEnded: ended } = ok(await users.admin.disable(CTX, { email: need(flags.email, 'email') }))
      return { json: { ...userJson(user), sessionsEnded: ended }, human: `${user.email} is disabled${changed ? '' : ' already'}; ${ended} session(s) ended` }
    }
    case 'two-factor-off': {
      const { user, changed, sessionsEnded: ended } = ok(await users.admin.turnOffTwoFactor(CTX, { email: need(flags.email, 'email') }))
      return {
        json: { ...userJson(user), sessionsEnded: ended },
        human: changed ? `${user.email} signs in with the password alone now; ${ended} session(s) ended` : `${user.email} has no two-factor sign-in`,
      }
    }
    default:
      throw new UsageError(`unknown command "user ${verb ?? ''}"`)
  }
}

/** runOperatorInvite: `operator invite`, an operator invitation emailed, or its link printed (admin/operator-invite.ts). */
async function runOperatorInvite(config: Config, services: Services, flags: Flags): Promise<Output> {
  const invitation = ok(await inviteOperator(services.team, config, CTX, need(flags.email, 'email')))
  const until = `works once, until ${invitation.expiresAt}`
  if (flags['print-link'] === true) {
    return {
      json: { email: invitation.email, expiresAt: invitation.expiresAt, link: invitation.link },
      human: `Operator invitation for ${invitation.email} (${until}).\nLink (a secret: give it to ${invitation.email} yourself, over a channel you trust): ${invitation.link}`,
    }
  }
  const mailer = openMailer(config, { info: stderrLine('info'), warn: stderrLine('warn') })
  try {
    await mailer.send(operatorMessage(config, invitation))
  } catch (error) {
    throw new CommandError(`${(error as Error).message}; the invitation stands unsent: run the command again (a new one replaces it), or with --print-link`)
  } finally {
    mailer.close()
  }
  return {
    json: { email: invitation.email, expiresAt: invitation.expiresAt, sent: true },
    human: `Operator invitation emailed to ${invitation.email} (${until})`,
  }
}

async function runOperators(config: Config, services: Services, verb: string | undefined, flags: Flags): Promise<Output> {
  const users = services.users
  switch (verb) {
    case 'invite':
      return runOperatorInvite(config, services, flags)
    case 'grant':
    case 'revoke': {
      const operator = verb === 'grant'
      const { user, changed } = ok(await users.admin.setOperator(CTX, { email: need(flags.email, 'email') }, operator))
      const state = operator ? 'is an operator' : 'is not an operator'
      return { json: { ...userJson(user), changed }, human: `${user.email} ${state}${changed ? ' now' : ' already'}` }
    }
    case 'list': {
      const found = await users.admin.operators()
      return { json: found.map(userJson), human: table(found.map(userRow), ['id', 'email', 'status', 'confirmed', 'createdAt']) }
    }
    default:
      throw new UsageError(`unknown command "operator ${verb ?? ''}"`)
  }
}

/** readSecret: a secret from a file, or stdin ('-'), without its final line break; never from the command line (shells and `ps` keep those). */
async function readSecret(file: string): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of file === '-' ? process.stdin : (await open(file)).createReadStream()) {
    size += (chunk as Buffer).length
    if (size > 4096) throw new UsageError('the client secret file is larger than 4 KiB')
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '')
}

const ssoJson = (sso: SingleSignOn, p: SsoProvider) => ({
  id: p.id,
  name: p.name,
  issuer: p.issuer,
  clientId: p.clientId,
  clientSecret: p.clientSecret === null ? 'none' : 'set',
  domains: p.domains,
  joinAccountId: p.joinAccountId,
  joinRole: p.joinRole,
  mfa: p.mfa,
  passwordAllowed: p.passwordAllowed,
  redirectUri: sso.redirectUri(p.id),
})

async function runSso(sso: SingleSignOn, verb: string | undefined, id: string | undefined, flags: Flags): Promise<Output> {
  switch (verb) {
    case 'add': {
      const password = flags.password ?? 'allowed'
      if (password !== 'allowed' && password !== 'off') throw new UsageError('--password must be allowed or off')
      const { provider, created } = ok(
        await sso.saveProvider(CTX, {
          id: need(id, 'ID (sso add ID)'),
          name: need(flags.name, 'name'),
          issuer: need(flags.issuer, 'issuer'),
          clientId: need(flags['client-id'], 'client-id'),
          clientSecret: flags['client-secret-file'] === undefined ? null : await readSecret(flags['client-secret-file']),
          domains: flags.domains === undefined || flags.domains === '' ? [] : flags.domains.split(','),
          joinAccountId: flags.account ?? null,
          joinRole: (flags.role ?? (flags.account === undefined ? null : 'viewer')) as Role | null,
          mfa: (flags.mfa ?? 'portal') as SsoMfa,
          passwordAllowed: password === 'allowed',
        }),
      )
      const json = ssoJson(sso, provider)
      return {
        json: { ...json, created },
        human: `Provider ${provider.id} ${created ? 'added' : 'replaced'}. Register this redirect URI with it: ${json.redirectUri}`,
      }
    }
    case 'list': {
      const found = (await sso.listProviders()).map((p) => ssoJson(sso, p))
      const rows = found.map((p) => ({
        ...p,
        domains: p.domains.join(',') || '(any)',
        join: p.joinAccountId === null ? '' : `${p.joinAccountId} as ${p.joinRole}`,
      }))
      return { json: found, human: table(rows, ['id', 'name', 'issuer', 'clientId', 'domains', 'join', 'mfa', 'passwordAllowed', 'redirectUri']) }
    }
    case 'remove': {
      ok(await sso.deleteProvider(CTX, need(id, 'ID (sso remove ID)')))
      return { json: { id, deleted: true }, human: `Provider ${id} removed: its links are gone and the sessions signed in through it ended` }
    }
    default:
      throw new UsageError(`unknown command "sso ${verb ?? ''}"`)
  }
}

const lockWords = (lockedUntil: string | null) => (lockedUntil === null ? 'not locked' : `locked until ${lockedUntil}`)

async function runTotpUsers(config: Config, service: Factors, verb: string | undefined, flags: Flags, json: boolean): Promise<Output> {
  if (!['list', 'show', 'unlock', 'delete', 'import'].includes(verb ?? '')) throw new UsageError(`unknown command "totp-user ${verb ?? ''}"`)
  const accountId = need(flags.account, 'account')
  switch (verb) {
    case 'import':
      return runImport(config, service, accountId, flags, json)
    case 'list': {
      const page = ok(
        await service.listUsers(accountId, {
          limit: number(flags.limit, 'limit', 1, 1000, true) ?? 100,
          ...(flags.after === undefined ? {} : { cursor: flags.after }),
        }),
      )
      const items = page.items.map((u) => ({
        userID: u.userId,
        createdAt: u.createdAt,
        activeFactors: u.active,
        pendingFactors: u.pending,
        recoveryCodesLeft: u.recoveryCodesLeft,
        lockedUntil: u.lockedUntil,
      }))
      const rows = items.map((u) => ({ ...u, active: u.activeFactors, pending: u.pendingFactors, codesLeft: u.recoveryCodesLeft, locked: u.lockedUntil ?? '' }))
      const more = page.next === null ? '' : `\n(more: --after ${page.next})`
      return { json: { items, next: page.next }, human: table(rows, ['userID', 'active', 'pending', 'codesLeft', 'locked', 'createdAt']) + more }
    }
    case 'show': {
      const user = ok(await service.user(accountId, need(flags.user, 'user')))
      const factors = user.factors.map(factorView)
      const rows = factors.map((f) => ({
        ...f,
        label: f.label ?? '',
        code: f.type === 'totp' ? `${f.algorithm} ${f.tokenLength} digits ${f.tokenValidity} s` : `passkey ${f.algorithm}`,
        drift: f.type === 'totp' ? f.driftSteps : '',
        since: f.activatedAt ?? `(expires ${f.expiresAt})`,
      }))
      return {
        json: {
          accountId,
          userID: user.userId,
          factors,
          recoveryCodesLeft: user.recoveryCodesLeft,
          locked: user.lockedUntil !== null,
          lockedUntil: user.lockedUntil,
        },
        human: [
          `User ${user.userId} of account ${accountId}: ${lockWords(user.lockedUntil)}; ${user.recoveryCodesLeft} recovery code(s) left`,
          table(rows, ['factorID', 'status', 'label', 'applicationID', 'profile', 'code', 'drift', 'createdAt', 'since']),
        ].join('\n'),
      }
    }
    case 'unlock': {
      const userId = need(flags.user, 'user')
      const { cleared } = ok(await service.clearLockout(CTX, accountId, userId))
      return {
        json: { accountId, userID: userId, cleared },
        human: cleared ? `User ${userId}'s lockout is cleared: their next right code is taken` : `User ${userId} had no failures to clear`,
      }
    }
    default: {
      const userId = need(flags.user, 'user')
      ok(await service.deleteUser(CTX, accountId, userId))
      return { json: { accountId, userID: userId, deleted: true }, human: `Deleted user ${userId}'s factors and recovery codes in account ${accountId}` }
    }
  }
}

/**
 * runImport: `totp-user import`, a CSV of secrets streamed into the account (services/factor-import.ts).
 * Each line's outcome is written as it is known, so an interrupted run shows where to go on from.
 */
async function runImport(config: Config, service: Factors, accountId: string, flags: Flags, json: boolean): Promise<Output> {
  const file = need(flags.file, 'file')
  const status = flags.status ?? 'active'
  if (status !== 'active' && status !== 'pending') throw new UsageError(`--status must be active or pending (got "${status}")`)
  const profile = flags.profile ?? 'any'
  if (!isProfileName(profile)) throw new UsageError(`--profile must be one of ${PROFILE_NAMES.join(', ')} (got "${profile}")`)
  const from = number(flags.from, 'from', 1, 100_000_000, true) ?? 1
  ok(await service.settings(accountId))
  // Opened before the import starts: a file that is not there is an error, not an import that stopped at once.
  const input = file === '-' ? process.stdin : (await open(file)).createReadStream()
  let summary: ImportSummary | undefined
  for await (const item of importCsv(service, CTX, accountId, input, {
    ...(flags.application === undefined ? {} : { applicationId: flags.application }),
    profile,
    status,
    from,
    maxBytes: config.importMaxBytes,
  })) {
    if ('done' in item) summary = item
    else if (json) process.stdout.write(`${JSON.stringify(item)}\n`)
    else if (item.outcome === 'refused') process.stdout.write(`line ${item.line}: refused (${item.code}): ${item.message}\n`)
    else if (item.outcome === 'imported' && item.line % 1000 === 0) process.stdout.write(`line ${item.line}: imported so far\n`)
  }
  const s = summary!
  return {
    json: s,
    human: `${s.lines} line(s): ${s.imported} imported, ${s.exists} there already, ${s.refused} refused, ${s.skipped} skipped${s.stopped === null ? '' : `; stopped: ${s.stopped}`}`,
    ...(s.refused > 0 || s.stopped !== null ? { exitCode: IMPORT_INCOMPLETE } : {}),
  }
}

/** runFactorSettings: `factor-settings show|set`, an account's passkey relying party and attempt limits. */
async function runFactorSettings(service: Factors, verb: string | undefined, flags: Flags): Promise<Output> {
  if (verb !== 'show' && verb !== 'set') throw new UsageError(`unknown command "factor-settings ${verb ?? ''}"`)
  const accountId = need(flags.account, 'account')
  const cleared = (value: string | undefined) => (value === undefined ? undefined : value === 'none' ? null : value)
  const limit = (flag: 'user-limit' | 'key-limit' | 'window', max: number) => (flags[flag] === 'none' ? null : number(flags[flag], flag, 1, max, true))
  const patch: FactorSettingsPatch =
    verb === 'show'
      ? {}
      : Object.fromEntries(
          Object.entries({
            rpId: cleared(flags['rp-id']),
            rpName: cleared(flags['rp-name']),
            origins: flags.origins === undefined ? undefined : flags.origins === 'none' ? [] : flags.origins.split(',').map((o) => o.trim()),
            userLimit: limit('user-limit', 10_000),
            keyLimit: limit('key-limit', 1_000_000),
            limitWindowSeconds: limit('window', 86_400),
          }).filter(([, v]) => v !== undefined),
        )
  const settings = ok(verb === 'show' ? await service.settings(accountId) : await service.updateSettings(CTX, accountId, patch))
  const or = (v: unknown, none: string) => (v === null ? none : String(v))
  return {
    json: { accountId, ...settings },
    human: [
      `Factor settings of account ${accountId}${verb === 'set' ? ' (changed)' : ''}:`,
      `  passkeys: ${settings.rpId === null ? 'off (no relying party ID)' : `relying party ${settings.rpId} ("${settings.rpName ?? settings.rpId}")`}`,
      `  origins: ${settings.origins.length === 0 ? 'none' : settings.origins.join(', ')}`,
      `  attempts per user: ${or(settings.userLimit, 'server default')}; per rate key: ${or(settings.keyLimit, 'server default')}; window: ${or(settings.limitWindowSeconds, 'server default')} s`,
    ].join('\n'),
  }
}

async function runEncryption(encryption: Encryption, verb: string, flags: Flags): Promise<Output> {
  const ring = encryption.keyring
  switch (verb) {
    case 'status': {
      const counts = await encryption.sealVersions()
      const seen = SEALED_KINDS.flatMap((kind) => [...counts[kind].keys()])
      const versions = [...new Set([...ring.versions, ...seen])].sort((a, b) => a - b)
      const rows = versions.map((version) => {
        const of = Object.fromEntries(SEALED_KINDS.map((kind) => [kind, counts[kind].get(version) ?? 0])) as Record<SealedKind, number>
        return {
          version,
          configured: ring.versions.includes(version),
          active: version === ring.active,
          ...of,
          total: SEALED_KINDS.reduce((n, kind) => n + of[kind], 0),
        }
      })
      return {
        json: { active: ring.active, versions: rows },
        human: table(rows as never[], ['version', 'configured', 'active', ...SEALED_KINDS, 'total']),
      }
    }
    case 'generate': {
      const item = newKeyItem(Math.max(...ring.versions) + 1)
      return {
        json: { item },
        human: `${item}\nAppend it to ENCRYPTION_KEYS (comma-separated) on every node; it seals from then on (pin ENCRYPTION_ACTIVE_VERSION until every node has it).`,
      }
    }
    default: {
      const batch = flags.batch === undefined ? 500 : Number(flags.batch)
      if (!Number.isInteger(batch) || batch < 1 || batch > 10000) throw new UsageError('--batch must be a whole number from 1 to 10000')
      const all = await encryption.reseal(batch)
      const { factors: done, portalUsers: portal, webhookEndpoints: hooks, idempotencyAnswers: answers, jobSecrets: jobs, leftUnderOtherVersions: left } = all
      const unreadable = [...done.unreadable, ...portal.unreadable, ...hooks.unreadable, ...answers.unreadable, ...jobs.unreadable]
      const human = [
        `Re-sealed ${done.resealed} factors under key version ${ring.active}; ${done.skipped} changed meanwhile; ${left} values of every kind left under other versions.`,
        `Re-sealed ${portal.resealed} portal users' two-factor secrets and single sign-on client secrets, ${hooks.resealed} webhook endpoints' signing secrets, ${answers.resealed} kept Idempotency-Key answers and ${jobs.resealed} conversion jobs' secrets.`,
        ...unreadable.map((u) => `  ${u.id} does not open: ${u.reason}`),
      ]
      if (unreadable.length > 0) human.push('What does not open keeps its old version: do not remove it until those are deleted (or have expired).')
      return {
        json: {
          ...done,
          activeVersion: ring.active,
          leftUnderOtherVersions: left,
          portalUsers: portal,
          webhookEndpoints: hooks,
          idempotencyAnswers: answers,
          jobSecrets: jobs,
        },
        human: human.join('\n'),
      }
    }
  }
}

/** unknown is the refusal of a command line that names no command. */
const unknown = (words: readonly string[]) => new UsageError(`unknown command "${words.join(' ')}"`)

async function runAccounts(accounts: Accounts, words: readonly string[], flags: Flags): Promise<Output> {
  const [, verb, arg] = words
  switch (verb) {
    case 'create': {
      const account = ok(await accounts.createAccount(CTX, { name: need(flags.name, 'name') }))
      // The admin API's fields; `accountId` is the old CLI name of `id`, kept until 0.3.0 (CHANGELOG.md).
      return { json: { ...account, accountId: account.id }, human: `Created account ${account.id} (${account.name})` }
    }
    case 'suspend':
    case 'activate': {
      const id = need(arg, 'account id')
      const status = verb === 'suspend' ? 'suspended' : 'active'
      const account = ok(await accounts.updateAccount(CTX, id, { status }))
      return { json: { ...account, accountId: id }, human: `Account ${id} is ${status}` }
    }
    case 'rename': {
      const id = need(arg, 'account id')
      const account = ok(await accounts.updateAccount(CTX, id, { name: need(flags.name, 'name') }))
      return { json: account, human: `Account ${id} is now named ${account.name}` }
    }
    case 'list': {
      const status = flags.status
      if (status !== undefined && status !== 'active' && status !== 'suspended') throw new UsageError(`--status must be active or suspended (got "${status}")`)
      const page = await accounts.listAccounts({
        limit: number(flags.limit, 'limit', 1, 100_000, true) ?? 1000,
        ...(status === undefined ? {} : { status }),
        ...(flags.name === undefined ? {} : { name: flags.name }),
        ...(flags.after === undefined ? {} : { cursor: flags.after }),
      })
      const more = page.next === null ? '' : `\n(more: --after ${page.next})`
      return { json: page.next === null ? page.items : page, human: table(page.items as never[], ['id', 'name', 'status', 'createdAt']) + more }
    }
    default:
      throw unknown(words)
  }
}

async function runKeys(accounts: Accounts, words: readonly string[], flags: Flags): Promise<Output> {
  const [, verb, arg] = words
  switch (verb) {
    case 'create': {
      const accountId = need(flags.account, 'account')
      const issued = ok(
        await accounts.issueKey(CTX, accountId, {
          name: flags.name ?? '',
          ...(flags.expires === undefined ? {} : { expiresAt: flags.expires }),
          ...(flags.groups === undefined && flags.regions === undefined ? {} : { scope: { groups: list(flags.groups), regions: list(flags.regions) } }),
        }),
      )
      return {
        // The admin API's fields; `keyId` is the old CLI name of `id`, kept until 0.3.0 (CHANGELOG.md).
        json: { ...issued.key, apiKey: issued.apiKey, keyId: issued.key.id },
        human: `Created key ${issued.key.id} for account ${accountId}${describeKey(issued.key)}.\nAPI key (shown once, store it now): ${issued.apiKey}`,
      }
    }
    case 'roll': {
      const id = need(arg, 'key id')
      const grace = number(flags.grace, 'grace', 0, 604_800, true) ?? DEFAULT_ROLL_GRACE_SECONDS
      const rolled = ok(await accounts.rollKey(CTX, id, { graceSeconds: grace }))
      const until = grace === 0 ? 'stopped now' : `works until ${rolled.old.expiresAt}`
      return {
        json: { ...rolled.key, apiKey: rolled.apiKey, keyId: rolled.key.id, old: { ...rolled.old, keyId: id } },
        human: `Key ${id} rolled to ${rolled.key.id} (the old key ${until}).\nAPI key (shown once, store it now): ${rolled.apiKey}`,
      }
    }
    case 'revoke': {
      const id = need(arg, 'key id')
      const revoked = await accounts.revokeKey(CTX, id)
      if (isFailure(revoked)) throw new CommandError(`no active key ${id}`)
      return { json: { ...revoked, keyId: id, revoked: true }, human: `Key ${id} is revoked` }
    }
    case 'list': {
      const keys = await accounts.listKeys(flags.account)
      const rows = keys.map((k) => ({
        ...k,
        hint: `…${k.hint}`,
        revokedAt: k.revokedAt ?? '',
        expiresAt: k.expiresAt ?? '',
        scope: k.scope.groups === null && k.scope.regions === null ? 'all' : describeKey({ ...k, expiresAt: null }).trim(),
        lastUsed: k.lastUsedAt === null ? '' : `${k.lastUsedAt} (${k.lastUsedRegion})`,
      }))
      return { json: keys, human: table(rows, ['id', 'accountId', 'name', 'hint', 'createdAt', 'expiresAt', 'revokedAt', 'scope', 'lastUsed']) }
    }
    default:
      throw unknown(words)
  }
}

/** grantOrRevoke sets every region × group pair named (`all` expands) active or inactive. */
async function grantOrRevoke(accounts: Accounts, verb: 'grant' | 'revoke', flags: Flags): Promise<Output> {
  const accountId = need(flags.account, 'account')
  const regions: readonly Region[] = expand(need(flags.region, 'region'), REGIONS, isRegion, 'region')
  const groups: readonly Group[] = expand(need(flags.group, 'group'), GROUPS, isGroup, 'group')
  await requireAccount(accounts, accountId)
  const status = verb === 'grant' ? 'active' : 'inactive'
  const pairs: string[] = []
  for (const region of regions) {
    for (const group of groups) {
      const set = await accounts.setSubscription(CTX, accountId, region, group, status)
      // `all` skips what is not served (the converter outside eu); naming it alone is an error.
      if (isFailure(set)) {
        if (regions.length * groups.length === 1) throw new CommandError(set.message)
        continue
      }
      pairs.push(`${region}:${group}`)
    }
  }
  return { json: { accountId, status, subscriptions: pairs }, human: `${pairs.join(', ')} ${status} for account ${accountId}` }
}

async function runSubscriptions(accounts: Accounts, words: readonly string[], flags: Flags): Promise<Output> {
  const verb = words[1]
  switch (verb) {
    case 'grant':
    case 'revoke':
      return grantOrRevoke(accounts, verb, flags)
    case 'approve': {
      const accountId = need(flags.account, 'account')
      const sub = ok(await accounts.setSubscription(CTX, accountId, need(flags.region, 'region'), need(flags.group, 'group'), 'approved'))
      return { json: sub, human: `${sub.region}:${sub.group} active for account ${accountId}` }
    }
    case 'list': {
      const accountId = need(flags.account, 'account')
      await requireAccount(accounts, accountId)
      const subs = await accounts.listSubscriptions(accountId)
      return { json: subs, human: table(subs as never[], ['region', 'group', 'status', 'updatedAt']) }
    }
    default:
      throw unknown(words)
  }
}

async function runPlans(accounts: Accounts, words: readonly string[], flags: Flags): Promise<Output> {
  switch (words[1]) {
    case 'set': {
      const accountId = need(flags.account, 'account')
      const period = flags.period
      if (period !== undefined && period !== 'day' && period !== 'month') throw new UsageError(`--period must be day or month (got "${period}")`)
      const weightTotp = number(flags['weight-totp'], 'weight-totp', 0, 1e6, true)
      const weightConverter = number(flags['weight-converter'], 'weight-converter', 0, 1e6, true)
      const plan = ok(
        await accounts.setPlan(CTX, accountId, {
          ...(flags.rate === undefined ? {} : { rate: number(flags.rate, 'rate', 0, 1e6, false)! }),
          ...(flags.burst === undefined ? {} : { burst: number(flags.burst, 'burst', 1, 1e9, true)! }),
          ...(flags.quota === undefined ? {} : { quota: number(flags.quota, 'quota', 0, 1e12, true)! }),
          ...(period === undefined ? {} : { period }),
          weights: { ...(weightTotp === undefined ? {} : { totp: weightTotp }), ...(weightConverter === undefined ? {} : { converter: weightConverter }) },
        }),
      )
      return { json: { accountId, plan }, human: `Account ${accountId}: ${describePlan(plan)}` }
    }
    case 'reset': {
      const accountId = need(flags.account, 'account')
      const plan = ok(await accounts.resetPlan(CTX, accountId))
      return { json: { accountId, plan, default: true }, human: `Account ${accountId}: default plan (${describePlan(plan)})` }
    }
    case 'show': {
      const accountId = need(flags.account, 'account')
      const found = await accounts.getPlan(accountId)
      if (found === null) throw new CommandError(`no account ${accountId}`)
      return {
        json: { accountId, plan: found.plan, default: !found.own },
        human: `Account ${accountId}: ${found.own ? '' : 'default plan, '}${describePlan(found.plan)}`,
      }
    }
    default:
      throw unknown(words)
  }
}

/** runUsage: `usage`, an account's calls and units over its last days. */
async function runUsage(accounts: Accounts, flags: Flags): Promise<Output> {
  const accountId = need(flags.account, 'account')
  const days = number(flags.days, 'days', 1, 400, true) ?? 31
  const by = flags.by ?? 'day'
  if (by !== 'day' && by !== 'key' && by !== 'region') throw new UsageError(`--by must be day, key or region (got "${by}")`)
  const to = new Date().toISOString().slice(0, 10)
  const from = new Date(Date.now() - (days - 1) * 86_400_000).toISOString().slice(0, 10)
  const rows = ok(await accounts.usage(accountId, from, to, by))
  const column = by === 'day' ? 'day' : by === 'key' ? 'keyId' : 'region'
  return { json: { accountId, from, to, by, usage: rows }, human: table(rows as never[], [column, 'group', 'count', 'units']) }
}

/** runAudit: `audit`, a page of the trail, newest first. */
async function runAudit(accounts: Accounts, flags: Flags): Promise<Output> {
  const page = await accounts.auditEvents({
    limit: number(flags.limit, 'limit', 1, 10_000, true) ?? 50,
    ...(flags.account === undefined ? {} : { accountId: flags.account }),
    ...(flags.actor === undefined ? {} : { actor: flags.actor }),
    ...(flags.action === undefined ? {} : { action: flags.action }),
    ...(flags.after === undefined ? {} : { cursor: flags.after }),
  })
  const rows = page.items.map((e) => ({
    ...e,
    target: `${e.target.type}:${e.target.id}`,
    ip: e.ip ?? '',
    accountId: e.accountId ?? '',
    detail: JSON.stringify(e.detail),
  }))
  const more = page.next === null ? '' : `\n(more: --after ${page.next})`
  return { json: page, human: table(rows, ['at', 'actor', 'action', 'target', 'accountId', 'ip', 'outcome', 'detail']) + more }
}

/** jobRow: a job as a row of the people's table. */
const jobRow = (j: ReturnType<typeof jobView>) => ({
  ...j,
  pages: j.pagesTotal === null ? String(j.pagesDone) : `${j.pagesDone}/${j.pagesTotal}`,
  finishedAt: j.finishedAt ?? '',
  result: j.result !== null ? `${j.result.size} bytes until ${j.result.expiresAt}` : j.resultGone ? 'gone' : '',
  error: j.error?.code ?? '',
})

/** runJobs: `jobs list|cancel ACCOUNTID …`, an account's conversion jobs, shown as the admin API shows them. */
async function runJobs(config: Config, services: Services, words: readonly string[], flags: Flags): Promise<Output> {
  const [, verb, accountArg, jobArg, ...extra] = words
  if ((verb !== 'list' && verb !== 'cancel') || extra.length > 0 || (verb === 'list' && jobArg !== undefined)) throw unknown(words)
  const accountId = need(accountArg, 'account id')
  const view = (job: ConversionJob) => jobView(job, config.publicBaseUrl)
  if (verb === 'cancel') {
    const jobId = need(jobArg, 'job id')
    await requireAccount(services.accounts, accountId)
    const done = await services.jobs.cancel(CTX, accountId, jobId)
    if (isRefusal(done)) throw new CommandError(refusalReason(done, accountId, jobId))
    const what = done.status === 'cancelled' ? 'is cancelled' : `keeps no result now (it stays ${done.status}; its download answers 410)`
    return { json: view(done), human: `Job ${jobId} of account ${accountId} ${what}` }
  }
  const page = await listJobs(services.jobs, accountId, flags, services.accounts)
  const more = page.next === null ? '' : `\n(more: --after ${page.next})`
  const items = page.items.map(view)
  return {
    json: { items, next: page.next },
    human: table(items.map(jobRow), ['jobID', 'status', 'operation', 'pages', 'createdAt', 'finishedAt', 'result', 'error']) + more,
  }
}

/** listJobs: a page of the account's jobs, its flags checked first (a usage error), then the account. */
async function listJobs(jobs: Jobs, accountId: string, flags: Flags, accounts: Accounts) {
  const status = flags.status
  if (status !== undefined && !isJobStatus(status)) throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')} (got "${status}")`)
  const limit = number(flags.limit, 'limit', 1, 100, true) ?? 20
  await requireAccount(accounts, accountId)
  const page = await jobs.list(accountId, {
    limit,
    ...(status === undefined ? {} : { status }),
    ...(flags.after === undefined ? {} : { cursor: flags.after }),
  })
  if (isFailure(page)) throw new CommandError(`--after: ${page.message}`)
  return page
}

/** runAdminTokens: `admin token …`, the admin API's tokens. */
async function runAdminTokens(accounts: Accounts, words: readonly string[], flags: Flags): Promise<Output> {
  const [, , verb, id] = words
  switch (verb) {
    case 'create': {
      const created = ok(await accounts.createAdminToken(CTX, { name: need(flags.name, 'name'), scope: need(flags.scope, 'scope') }))
      return {
        json: { tokenId: created.token.id, token: created.secret, scope: created.token.scope },
        human: `Created ${created.token.scope} admin token ${created.token.id} (${created.token.name}).\nToken (shown once, store it now): ${created.secret}`,
      }
    }
    case 'list': {
      const tokens = await accounts.listAdminTokens()
      return {
        json: tokens,
        human: table(
          tokens.map((t) => ({ ...t, revokedAt: t.revokedAt ?? '' })),
          ['id', 'name', 'scope', 'createdAt', 'revokedAt'],
        ),
      }
    }
    case 'revoke': {
      const tokenId = need(id, 'token id')
      ok(await accounts.revokeAdminToken(CTX, tokenId))
      return { json: { tokenId, revoked: true }, human: `Admin token ${tokenId} is revoked` }
    }
    default:
      throw unknown(words)
  }
}

/** runBackup: `backup FILE [--force]`, the SQLite store copied while the node serves (services/backup.ts). */
async function runBackup(config: Config, words: readonly string[], flags: Flags): Promise<Output> {
  if (words.length > 2) throw unknown(words)
  const made = ok(await backupStore(config, need(words[1], 'backup file'), { overwrite: flags.force === true }))
  return {
    json: made,
    human: `Backed up the SQLite store to ${made.file}: ${made.bytes} bytes, integrity ${made.integrity}, schema version ${made.schemaVersion}`,
  }
}

/** checks: a copy's or a check's tables, one line each, and what they come to. */
function checks(tables: readonly TableCheck[]): { lines: string; differ: string[] } {
  const rows = tables.map((t) => ({
    table: t.table,
    'source rows': t.sourceRows,
    'target rows': t.targetRows,
    'sha256 (source)': t.sourceSha256.slice(0, 16),
    'sha256 (target)': t.targetSha256.slice(0, 16),
    '': t.same ? 'same' : 'DIFFERS',
  }))
  const lines = table(rows, ['table', 'source rows', 'target rows', 'sha256 (source)', 'sha256 (target)', ''])
  return { lines, differ: tables.filter((t) => !t.same).map((t) => t.table) }
}

/** runStore: `store copy` and `store verify` (services/store-copy.ts), which open the two stores themselves. */
async function runStore(config: Config, words: readonly string[], flags: Flags): Promise<Output> {
  if (words.length !== 2) throw unknown(words)
  if (words[1] === 'verify') {
    const checked = ok(await verifyStore(config, need(flags.against, 'against')))
    const { lines, differ } = checks(checked.tables)
    const verdict =
      differ.length === 0
        ? `Every table is the same in ${checked.source} and ${checked.target}.`
        : `${differ.length} of ${checked.tables.length} tables differ: ${differ.join(', ')}.`
    return { json: checked, human: `${lines}\n${verdict}`, ...(differ.length === 0 ? {} : { exitCode: STORE_DIFFERS }) }
  }
  if (words[1] !== 'copy') throw unknown(words)
  if ((flags.to === undefined) === (flags.from === undefined)) throw new UsageError('give one of --to postgres://… and --from postgres://…')
  const batchRows = number(flags.batch, 'batch', 1, 100_000, true) ?? DEFAULT_BATCH_ROWS
  const report = ok(
    await copyStore(config, {
      ...(flags.to === undefined ? {} : { to: flags.to }),
      ...(flags.from === undefined ? {} : { from: flags.from }),
      force: flags.force === true,
      batchRows,
      // One line a batch committed, on stderr: the output proper stays the report (or its JSON).
      onProgress: (p) => process.stderr.write(`store copy: ${p.table} ${p.rows} of ${p.total} rows\n`),
    }),
  )
  const { lines, differ } = checks(report.tables)
  const resumed = report.resumedAfter === 0 ? '' : ` (going on from an earlier run, which had copied ${report.resumedAfter})`
  const differing = `${differ.length} of ${report.tables.length} tables differ: ${differ.join(', ')}.`
  const verdict =
    differ.length === 0
      ? 'Every table is the same: the copy is whole, and nodes may start on it.'
      : report.finished
        ? `${differing} With --force, the rows the target held stay beside the copied ones; nodes may start on it.`
        : `${differing} The target stays marked as an unfinished copy, which no node opens: was the source written to during the copy? ` +
          'Stop every node of it, then empty the target and copy again.'
  return {
    json: report,
    human: `Copied ${report.copied} rows${resumed} from ${report.source} to ${report.target} in ${report.seconds} s (the check ${report.checkSeconds} s).\n${lines}\n${verdict}`,
    ...(differ.length === 0 ? {} : { exitCode: STORE_DIFFERS }),
  }
}

/** run hands a command line to its noun's runner; `usage`, `audit` and `migrate` take no verb. */
async function run(config: Config, services: Services, words: readonly string[], flags: Flags): Promise<Output> {
  const { accounts, users } = services
  const [noun, verb] = words
  if (noun === 'user' && words.length <= 2) return runUsers(config, users, verb, flags)
  if (noun === 'operator' && words.length <= 2) return runOperators(config, services, verb, flags)
  if (noun === 'totp-user' && words.length <= 2) return runTotpUsers(config, services.factors, verb, flags, flags.json === true)
  if (noun === 'factor-settings' && words.length <= 2) return runFactorSettings(services.factors, verb, flags)
  if (noun === 'sso' && words.length <= 3) return runSso(services.sso, verb, words[2], flags)
  switch (noun) {
    case 'account':
      return runAccounts(accounts, words, flags)
    case 'key':
      return runKeys(accounts, words, flags)
    case 'subscription':
      return runSubscriptions(accounts, words, flags)
    case 'plan':
      return runPlans(accounts, words, flags)
    case 'usage':
      if (verb === undefined) return runUsage(accounts, flags)
      break
    case 'audit':
      if (verb === undefined) return runAudit(accounts, flags)
      break
    case 'admin':
      if (verb === 'token') return runAdminTokens(accounts, words, flags)
      break
    case 'encryption':
      if (verb === 'status' || verb === 'generate' || verb === 'rotate') return runEncryption(services.encryption, verb, flags)
      break
    case 'jobs':
      return runJobs(config, services, words, flags)
    case 'migrate':
      // Opening the store applies pending migrations.
      if (verb === undefined) return { json: { migrated: true, store: services.storeKind }, human: `Schema is up to date (${services.storeKind})` }
      break
  }
  throw unknown(words)
}

/**
 * usageOf gives the usage of the command `words` names (`key roll`: that entry; `key`: every key
 * command), not the whole page: an error should point at the one thing to fix. A command it does
 * not know gets one line that lists the commands.
 */
export function usageOf(words: readonly string[]): string {
  // Entries start at two spaces of indent; their continuation lines are indented further.
  const entries: string[] = []
  for (const line of USAGE.split('\n')) {
    if (/^ {2}\S/.test(line)) entries.push(line)
    else if (/^ {3,}\S/.test(line) && entries.length > 0) entries[entries.length - 1] += `\n${line}`
  }
  const starts = (entry: string, n: number) => {
    const head = entry.trim().split(/\s+/)
    return words.length >= n && words.slice(0, n).every((w, i) => head[i] === w)
  }
  for (const n of [2, 1]) {
    const found = entries.filter((e) => starts(e, n))
    if (found.length > 0) return `Usage: npm run admin -- <command> [options] [--json]\n\n${found.join('\n')}`
  }
  const commands = [...new Set(entries.map((e) => e.trim().split(/\s+/)[0]))]
  return `Commands: ${commands.join(', ')}. Run with --help for every command and its options.`
}

/** parse reads the command line; it throws on an unknown flag or a flag without its value. */
function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      'print-link': { type: 'boolean', default: false },
      force: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      version: { type: 'boolean', default: false },
      name: { type: 'string' },
      account: { type: 'string' },
      region: { type: 'string' },
      group: { type: 'string' },
      rate: { type: 'string' },
      burst: { type: 'string' },
      quota: { type: 'string' },
      period: { type: 'string' },
      days: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      after: { type: 'string' },
      expires: { type: 'string' },
      groups: { type: 'string' },
      regions: { type: 'string' },
      grace: { type: 'string' },
      by: { type: 'string' },
      actor: { type: 'string' },
      action: { type: 'string' },
      scope: { type: 'string' },
      'weight-totp': { type: 'string' },
      'weight-converter': { type: 'string' },
      email: { type: 'string' },
      batch: { type: 'string' },
      user: { type: 'string' },
      file: { type: 'string' },
      application: { type: 'string' },
      profile: { type: 'string' },
      from: { type: 'string' },
      'rp-id': { type: 'string' },
      'rp-name': { type: 'string' },
      origins: { type: 'string' },
      'user-limit': { type: 'string' },
      'key-limit': { type: 'string' },
      window: { type: 'string' },
      issuer: { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret-file': { type: 'string' },
      domains: { type: 'string' },
      role: { type: 'string' },
      mfa: { type: 'string' },
      password: { type: 'string' },
      to: { type: 'string' },
      against: { type: 'string' },
    },
  })
}

export async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>
  try {
    parsed = parse(argv)
  } catch (error) {
    process.stderr.write(`error: ${(error as Error).message}\n${usageOf(argv.filter((a) => !a.startsWith('-')))}\n`)
    return 2
  }
  const { values, positionals } = parsed
  if (values.version) {
    process.stdout.write(`${VERSION}\n`)
    return 0
  }
  if (values.help && positionals.length > 0) {
    process.stdout.write(`${usageOf(positionals)}\n`)
    return 0
  }
  if (values.help || positionals.length === 0) {
    process.stdout.write(`${USAGE}\n`)
    return values.help ? 0 : 2
  }
  let services: Services | undefined
  try {
    const config = loadConfig()
    // A backup opens no store (no migration, no write lock): the copy reads the file on its own. A store copy opens both of its stores itself.
    const own = positionals[0] === 'backup' || positionals[0] === 'store'
    if (!own) services = await openServices(config)
    const out =
      services !== undefined
        ? await run(config, services, positionals, values)
        : positionals[0] === 'store'
          ? await runStore(config, positionals, values)
          : await runBackup(config, positionals, values)
    process.stdout.write(`${values.json ? JSON.stringify(out.json) : out.human}\n`)
    return out.exitCode ?? 0
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(`error: ${message.split('\n')[0]}\n`)
    if (error instanceof UsageError) process.stderr.write(`${usageOf(positionals)}\n`)
    return error instanceof UsageError ? 2 : error instanceof ConfigError ? 78 : 1
  } finally {
    await services?.close()
  }
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2))
