/**
 * The admin CLI: `npm run admin -- <command>`. It uses the server's configuration (same
 * environment variables, same store, same pepper), prints for people by default and JSON
 * with --json, exits 0 on success and non-zero with a one-line error otherwise.
 */
import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type Config } from '../config/config.ts'
import { resolvePepper } from '../config/pepper.ts'
import { openStore } from '../storage/factory.ts'
import type { Plan, Store } from '../storage/ports.ts'
import { defaultPlan } from '../usage/limits.ts'
import type { Pepper } from '../crypto/keyed.ts'
import { issueKey } from '../gateway/keys.ts'
import { GROUPS, REGIONS, isGroup, isRegion, type Group, type Region } from '../domain/regions.ts'

export const USAGE = `Usage: npm run admin -- <command> [options] [--json]

  account create --name NAME          create an account
  account suspend ID | activate ID    refuse or allow every call of an account
  account list
  key create --account ID [--name L]  create an API key (shown once)
  key revoke KEYID
  key list [--account ID]
  subscription grant  --account ID --region eu|us|apac|all --group totp|converter|all
  subscription revoke --account ID --region eu|us|apac|all --group totp|converter|all
  subscription list --account ID
  plan set --account ID [--rate R] [--burst B] [--quota Q] [--period day|month]
                                      give an account its own plan (unset flags keep
                                      their current value); rate 0 = no throttle, quota 0 = no quota
  plan reset --account ID             back to the default plan (PLAN_* settings)
  plan show --account ID
  usage --account ID [--days N]       calls per UTC day and API group, last N days (31)
  migrate                             apply pending schema migrations`

class UsageError extends Error {}
class CommandError extends Error {}

interface Output {
  json: unknown
  human: string
}

type Flags = {
  name?: string; account?: string; region?: string; group?: string
  rate?: string; burst?: string; quota?: string; period?: string; days?: string
}

function need(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`missing --${flag}`)
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
  const line = (values: readonly string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd()
  return [line(columns), ...cells.map(line)].join('\n')
}

async function requireAccount(store: Store, id: string): Promise<void> {
  if ((await store.access.getAccount(id)) === null) throw new CommandError(`no account ${id}`)
}

function number(value: string | undefined, flag: string, min: number, max: number, whole: boolean): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max || (whole && !Number.isInteger(n))) {
    throw new UsageError(`--${flag} must be a ${whole ? 'whole ' : ''}number from ${min} to ${max} (got "${value}")`)
  }
  return n
}

const describePlan = (p: Plan) =>
  `rate ${p.rate === 0 ? 'unlimited' : `${p.rate}/s`}, burst ${p.burst}, quota ${p.quota === 0 ? 'none' : `${p.quota} per ${p.period}`}`

async function run(store: Store, pepper: Pepper, config: Config, words: readonly string[], flags: Flags): Promise<Output> {
  const [noun, verb, arg] = words
  const access = store.access
  switch (`${noun} ${verb}`) {
    case 'account create': {
      const account = await access.createAccount(need(flags.name, 'name'))
      return { json: { accountId: account.id }, human: `Created account ${account.id} (${account.name})` }
    }
    case 'account suspend':
    case 'account activate': {
      const id = need(arg, 'account id')
      if (!(await access.setAccountStatus(id, verb === 'suspend' ? 'suspended' : 'active'))) throw new CommandError(`no account ${id}`)
      const status = verb === 'suspend' ? 'suspended' : 'active'
      return { json: { accountId: id, status }, human: `Account ${id} is ${status}` }
    }
    case 'account list': {
      const accounts = await access.listAccounts()
      return { json: accounts, human: table(accounts as never[], ['id', 'name', 'status', 'createdAt']) }
    }
    case 'key create': {
      const accountId = need(flags.account, 'account')
      await requireAccount(store, accountId)
      const { info, apiKey } = await issueKey(access, pepper, accountId, flags.name ?? '')
      return {
        json: { keyId: info.id, apiKey },
        human: `Created key ${info.id} for account ${accountId}.\nAPI key (shown once, store it now): ${apiKey}`,
      }
    }
    case 'key revoke': {
      const id = need(arg, 'key id')
      if (!(await access.revokeKey(id))) throw new CommandError(`no active key ${id}`)
      return { json: { keyId: id, revoked: true }, human: `Key ${id} is revoked` }
    }
    case 'key list': {
      const keys = await access.listKeys(flags.account)
      const rows = keys.map((k) => ({ ...k, hint: `…${k.hint}`, revokedAt: k.revokedAt ?? '' }))
      return { json: keys, human: table(rows, ['id', 'accountId', 'name', 'hint', 'createdAt', 'revokedAt']) }
    }
    case 'subscription grant':
    case 'subscription revoke': {
      const accountId = need(flags.account, 'account')
      const regions: readonly Region[] = expand(need(flags.region, 'region'), REGIONS, isRegion, 'region')
      const groups: readonly Group[] = expand(need(flags.group, 'group'), GROUPS, isGroup, 'group')
      await requireAccount(store, accountId)
      const status = verb === 'grant' ? 'active' : 'inactive'
      for (const region of regions) for (const group of groups) await access.setSubscription(accountId, region, group, status)
      const pairs = regions.flatMap((r) => groups.map((g) => `${r}:${g}`))
      return { json: { accountId, status, subscriptions: pairs }, human: `${pairs.join(', ')} ${status} for account ${accountId}` }
    }
    case 'subscription list': {
      const accountId = need(flags.account, 'account')
      await requireAccount(store, accountId)
      const subs = await access.listSubscriptions(accountId)
      return { json: subs, human: table(subs as never[], ['region', 'group', 'status', 'updatedAt']) }
    }
    case 'plan set': {
      const accountId = need(flags.account, 'account')
      await requireAccount(store, accountId)
      const current = (await access.getPlan(accountId)) ?? defaultPlan(config)
      const period = flags.period ?? current.period
      if (period !== 'day' && period !== 'month') throw new UsageError(`--period must be day or month (got "${period}")`)
      const plan: Plan = {
        rate: number(flags.rate, 'rate', 0, 1e6, false) ?? current.rate,
        burst: number(flags.burst, 'burst', 1, 1e9, true) ?? current.burst,
        quota: number(flags.quota, 'quota', 0, 1e12, true) ?? current.quota,
        period,
      }
      await access.setPlan(accountId, plan)
      return { json: { accountId, plan }, human: `Account ${accountId}: ${describePlan(plan)}` }
    }
    case 'plan reset': {
      const accountId = need(flags.account, 'account')
      await requireAccount(store, accountId)
      await access.setPlan(accountId, null)
      const plan = defaultPlan(config)
      return { json: { accountId, plan, default: true }, human: `Account ${accountId}: default plan (${describePlan(plan)})` }
    }
    case 'plan show': {
      const accountId = need(flags.account, 'account')
      await requireAccount(store, accountId)
      const own = await access.getPlan(accountId)
      const plan = own ?? defaultPlan(config)
      return { json: { accountId, plan, default: own === null }, human: `Account ${accountId}: ${own === null ? 'default plan, ' : ''}${describePlan(plan)}` }
    }
    case 'usage undefined': {
      const accountId = need(flags.account, 'account')
      await requireAccount(store, accountId)
      const days = number(flags.days, 'days', 1, 3660, true) ?? 31
      const from = new Date(Date.now() - (days - 1) * 86_400_000).toISOString().slice(0, 10)
      const rows = (await store.usage.list(accountId, from)).map(({ day, group, count }) => ({ day, group, count }))
      return { json: { accountId, from, usage: rows }, human: table(rows, ['day', 'group', 'count']) }
    }
    case 'migrate undefined':
      // Opening the store applies pending migrations.
      return { json: { migrated: true, store: store.kind }, human: `Schema is up to date (${store.kind})` }
    default:
      throw new UsageError(`unknown command "${words.join(' ')}"`)
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        name: { type: 'string' },
        account: { type: 'string' },
        region: { type: 'string' },
        group: { type: 'string' },
        rate: { type: 'string' },
        burst: { type: 'string' },
        quota: { type: 'string' },
        period: { type: 'string' },
        days: { type: 'string' },
      },
    })
  } catch (error) {
    process.stderr.write(`error: ${(error as Error).message}\n${USAGE}\n`)
    return 2
  }
  const { values, positionals } = parsed
  if (values.help || positionals.length === 0) {
    process.stdout.write(`${USAGE}\n`)
    return values.help ? 0 : 2
  }
  let store: Store | undefined
  try {
    const config = loadConfig()
    const pepper = resolvePepper(config)
    store = await openStore(config, { maintenance: false })
    const out = await run(store, pepper, config, positionals, values)
    process.stdout.write(`${values.json ? JSON.stringify(out.json) : out.human}\n`)
    return 0
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(`error: ${message.split('\n')[0]}\n`)
    if (error instanceof UsageError) process.stderr.write(`${USAGE}\n`)
    return error instanceof UsageError ? 2 : error instanceof ConfigError ? 78 : 1
  } finally {
    await store?.close()
  }
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2))
