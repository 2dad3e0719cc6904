/**
 * Storage ports: what the service needs from a store, with no word of how it is kept, and
 * nothing else (the entities, their errors and policies are in domain/). Adapters (SQLite,
 * PostgreSQL, Redis) implement them, and one contract suite runs against each.
 */
import type {
  Account,
  AccountStatus,
  AdminToken,
  ApiKeyInfo,
  AuditDraft,
  AuditEvent,
  KeyGrant,
  NewKey,
  PendingSubscription,
  Plan,
  Subscription,
  SubscriptionStatus,
} from '../domain/accounts.ts'
import type {
  EmailToken,
  Member,
  Membership,
  NewEmailToken,
  NewSession,
  NewSsoIdentity,
  NewSsoProvider,
  NewSsoRequest,
  NewUser,
  Role,
  Session,
  SsoIdentity,
  SsoProvider,
  SsoRequest,
  TokenPurpose,
  User,
  UserPatch,
  UserStatus,
} from '../domain/portal.ts'
import type { Group, Region } from '../domain/regions.ts'
import type { Page } from '../domain/lists.ts'
import type { Factor, FactorSettings, OnboardingRecord, PasskeyChallenge, TotpUser } from '../domain/factors.ts'
import type { LockPolicy, Verdict } from '../domain/lockout.ts'
import type { LimitDecision, RefusalLine, RefusalRow, UsageBy, UsageLine, UsageRow } from '../domain/usage.ts'
import type { NewWebhookEndpoint, WebhookDelivery, WebhookEndpoint } from '../domain/webhooks.ts'
import type { ConversionJob, Idempotency, JobError, JobResultInfo, JobStatus, NewJob } from '../domain/jobs.ts'

export interface AccountQuery {
  readonly status?: AccountStatus
  /** Accounts whose name contains this (case-insensitive). */
  readonly name?: string
  /** A `next` cursor of an earlier page. */
  readonly cursor?: string
  readonly limit: number
}

/** KeyUse: a key's latest admitted call, as a node saw it. */
export interface KeyUse {
  readonly keyId: string
  readonly atMs: number
  readonly region: Region
}

/** AccountOwner: the portal user who owns a new account, the most accounts they may own, and the membership's event. */
export interface AccountOwner {
  readonly userId: string
  readonly max: number
  readonly audit: AuditDraft
}

/**
 * KeyLimit: the most active keys an account may have, counted at `nowIso`, and the most ended
 * keys it keeps (`endedKept`; absent: all of them).
 */
export interface KeyLimit {
  readonly max: number
  readonly nowIso: string
  readonly endedKept?: number
}

/**
 * AccessStore is the accounts repository. Every change takes the audit event that records
 * it and commits both in one transaction: a change is never without its event, nor an event
 * without its change. Changes that find nothing to change (no such account, a key revoked
 * already) write neither and say so in their result.
 */
export interface AccessStore {
  /**
   * createAccount stores an account and its event. With `owner`, the portal user becomes its
   * owner (with the owner's event) in the same step, unless they own `owner.max` accounts
   * already: false, nothing written. Parallel creations for one user never pass the cap.
   */
  createAccount(account: Account, audit: AuditDraft, owner?: AccountOwner): Promise<boolean>
  getAccount(id: string): Promise<Account | null>
  /** listAccounts pages through accounts in creation order. A malformed cursor throws CursorError. */
  listAccounts(query: AccountQuery): Promise<Page<Account>>
  countAccounts(): Promise<number>
  /** updateAccount returns the account as changed, or null when there is no such account. */
  updateAccount(id: string, patch: { readonly name?: string; readonly status?: AccountStatus }, audit: AuditDraft): Promise<Account | null>
  /**
   * createKey stores a key by its hash; the key itself never reaches the store. With `limit`,
   * unless the account has `limit.max` active keys (not revoked, rolled or expired at
   * `limit.nowIso`): false, nothing written. Parallel creations never pass the cap. With
   * `limit.endedKept`, the account's ended keys (revoked, or expired at `limit.nowIso`) past
   * that many, those that ended longest ago first, are deleted in the same step.
   */
  createKey(key: NewKey, audit: AuditDraft, limit?: KeyLimit): Promise<boolean>
  getKey(id: string): Promise<ApiKeyInfo | null>
  /**
   * rollKey replaces a live key (not revoked, not expired at `nowIso`) by `next`: the old one
   * then works until `graceEndsAt` (or its own earlier expiry), or stops at once when
   * `graceEndsAt` is null. A key rolled to the old one and still in its grace ends it, its
   * expiry set to `nowIso`, in the same step: a chain of rolls has at most two working keys.
   * With `endedKept`, the account's ended keys past that many are deleted in the same step, as
   * createKey's are. False (nothing written) when the old key is not live.
   */
  rollKey(oldId: string, next: NewKey, nowIso: string, graceEndsAt: string | null, audit: AuditDraft, endedKept?: number): Promise<boolean>
  /**
   * revokeKey revokes a key and, in the same step, ends the grace of a key rolled to it (its
   * expiry set to now), which has no live key to lead to any more. False when there is no
   * such key or it was revoked already.
   */
  revokeKey(keyId: string, audit: AuditDraft): Promise<boolean>
  listKeys(accountId?: string): Promise<ApiKeyInfo[]>
  /**
   * setSubscription sets a subscription's status; with `from`, only when its status is `from`
   * now (an approval of a pending request), atomically. False when nothing was changed.
   */
  setSubscription(accountId: string, region: Region, group: Group, status: SubscriptionStatus, audit: AuditDraft, from?: SubscriptionStatus): Promise<boolean>
  listSubscriptions(accountId: string): Promise<Subscription[]>
  /**
   * listPendingSubscriptions pages through every account's pending subscriptions, oldest
   * request first (the operators' queue). A malformed cursor throws CursorError.
   */
  listPendingSubscriptions(query: { readonly cursor?: string; readonly limit: number }): Promise<Page<PendingSubscription>>
  findGrant(keyHash: string): Promise<KeyGrant | null>
  /** setPlan gives an account its own plan (null: back to the default); false when there is no such account. */
  setPlan(accountId: string, plan: Plan | null, audit: AuditDraft): Promise<boolean>
  getPlan(accountId: string): Promise<Plan | null>
  /** touchKeys records keys' last use (no audit: it is use, not a change). */
  touchKeys(uses: readonly KeyUse[]): Promise<void>
  /**
   * onChange calls `listener` after accounts, keys, subscriptions or plans change: at once for
   * changes made through this store, and as soon as the adapter can tell for changes made by
   * other processes. Returns the unsubscribe function.
   */
  onChange(listener: () => void): () => void
  /** onCommit calls `listener` after each change committed through this store (not others'). */
  onCommit(listener: () => void): () => void
}

export interface UserQuery {
  readonly status?: UserStatus
  /** Users whose email contains this (case-insensitive). */
  readonly email?: string
  /** A `next` cursor of an earlier page. */
  readonly cursor?: string
  readonly limit: number
}

/** Which of a user's sessions a change ends: all, all but the one it was asked from, or just that one (a sign-out). */
export type SessionsToEnd = 'all' | { readonly except: string } | { readonly only: string }

/**
 * UserChange: what changes together, in one step, when a user's sign-in changes (a new
 * password, a second factor on or off, new recovery codes, a sign-out, an operator's
 * disable): the user's fields, their recovery codes, their sessions, and the events.
 */
export interface UserChange {
  /** The user's fields to change (updated_at with them); none: the user is only looked up, and must exist. */
  readonly patch?: UserPatch
  /** The user's recovery codes (by their hashes), replacing all of theirs ([]: none left). */
  readonly recoveryCodes?: readonly string[]
  readonly sessions?: SessionsToEnd
  /**
   * The change's events, drafted by the caller once it knows how many sessions the step
   * ended (a sign-out's count is in its event): one per account of the user, as the
   * service decides, or none. Called inside the step; it must not wait for anything.
   */
  readonly audits: (sessionsEnded: number) => readonly AuditDraft[]
}

/** UserChanged: the user as changed, and how many sessions the change ended. */
export interface UserChanged {
  readonly user: User
  readonly sessionsEnded: number
}

/**
 * PortalStore keeps the developer portal's users, account memberships, sessions, email
 * tokens and recovery codes. Changes to users and memberships take their audit event, as
 * AccessStore's do (both or neither); so do the writes of sessions, tokens and recovery codes
 * that a user's or an operator's change is made of (changeUser, createToken, deleteTokens,
 * createSession, completeTwoFactor take the drafts of their events): a change is never
 * without its events, nor an event without its change. The rest of sessions, tokens and
 * codes (a link consumed, a code used, a session touched) are the mechanics of signing in,
 * recorded by the caller when it matters. Every single-use and
 * every limit (a token consumed once, a code used once, an account's last owner) is decided
 * in one atomic step, across processes and nodes. Times are ISO strings as toISOString writes
 * them (SQLite compares them as text).
 */
export interface PortalStore {
  /** createUser: false (nothing written) when a user has this email already, in any case. */
  createUser(user: NewUser, audit: AuditDraft): Promise<boolean>
  /** findUserByEmail finds a user by email, case-insensitively (emailKey). */
  findUserByEmail(email: string): Promise<User | null>
  getUser(id: string): Promise<User | null>
  /** updateUser returns the user as changed, or null when there is no such user; `audit` null: no event (a rehash on sign-in). */
  updateUser(id: string, patch: UserPatch, audit: AuditDraft | null): Promise<User | null>
  /**
   * changeUser makes a change of a user's sign-in in one step: the patch, the recovery codes,
   * the sessions ended and the events, all or nothing; null, and nothing written, when there
   * is no such user. One composite step rather than an event argument on each of
   * updateUser, setRecoveryCodes and deleteSessionsOf: the rule of what goes together (a new
   * password ends the other sessions; two-factor off takes the codes with it) stays in the
   * service, which names the parts, and the store keeps one way to make them atomic.
   */
  changeUser(id: string, change: UserChange): Promise<UserChanged | null>
  /**
   * setPendingPassword replaces the password of a user whose address is not confirmed yet (a
   * sign-up again for it), with its audit event; false, and nothing written, once the address
   * is confirmed (in the same step: a confirmation at the same time wins) or without the user.
   */
  setPendingPassword(id: string, passwordHash: string, audit: AuditDraft): Promise<boolean>
  /**
   * purgeUnconfirmed deletes the users whose address was never confirmed, made at or before
   * `beforeIso`, who have no live email link at `nowIso`: with their sessions, links, recovery
   * codes and memberships, and the accounts of which they were the only members that hold
   * nothing else (no key, subscription, plan, onboarding, managed factor user or webhook
   * endpoint: an account an operator has given something is kept). At most 500 users a call;
   * returns how many went.
   */
  purgeUnconfirmed(beforeIso: string, nowIso: string): Promise<number>
  /** listUsers pages through users in creation order. A malformed cursor throws CursorError. */
  listUsers(query: UserQuery): Promise<Page<User>>
  /** resealTotpSecret replaces a user's kept TOTP secret if it is still `from` (a key rotation; a concurrent change wins); false otherwise. */
  resealTotpSecret(id: string, from: string, to: string): Promise<boolean>

  /** addMember: false (nothing written) when the user is a member already, or there is no such account or user. */
  addMember(accountId: string, userId: string, role: Role, audit: AuditDraft): Promise<boolean>
  /** listMembers: an account's members, oldest first. */
  listMembers(accountId: string): Promise<Member[]>
  /** membershipsOf: the accounts a user belongs to, oldest membership first. */
  membershipsOf(userId: string): Promise<Membership[]>
  /**
   * setRole changes a member's role; false when there is no such member. Throws
   * LastOwnerError when it would demote the account's last owner: of owners demoted or
   * removed at once, however many, at least one stays.
   */
  setRole(accountId: string, userId: string, role: Role, audit: AuditDraft): Promise<boolean>
  /** removeMember: false when there is no such member; LastOwnerError for the last owner, as setRole. */
  removeMember(accountId: string, userId: string, audit: AuditDraft): Promise<boolean>

  /** saveSsoProvider creates a single sign-on provider or replaces the one of its id, with its event; true when created. */
  saveSsoProvider(provider: NewSsoProvider, audit: AuditDraft): Promise<boolean>
  getSsoProvider(id: string): Promise<SsoProvider | null>
  /** listSsoProviders: every provider, by id (a handful: the service caps how many). */
  listSsoProviders(): Promise<SsoProvider[]>
  /**
   * deleteSsoProvider deletes a provider with its identities and requests in flight, and ends
   * the sessions signed in through it, in one step with its event; false when there is none.
   */
  deleteSsoProvider(id: string, audit: AuditDraft): Promise<boolean>
  /**
   * createSsoRequest keeps an authorization request in flight, unless its source has `perIp`
   * live ones already at `nowIso`, or all sources together `total` (false, nothing written):
   * the counts and the write in one step.
   */
  createSsoRequest(request: NewSsoRequest, limits: { readonly perIp: number; readonly total: number }, nowIso: string): Promise<boolean>
  /** takeSsoRequest gives a live request by its state's hash and deletes it, once: of two at once, one gets it. */
  takeSsoRequest(stateHash: string, nowIso: string): Promise<SsoRequest | null>
  /** pruneSsoRequests deletes the requests expired at `nowIso`; returns how many. */
  pruneSsoRequests(nowIso: string): Promise<number>
  /** findSsoIdentity: the user a provider's subject is bound to, as they are now, or null. */
  findSsoIdentity(providerId: string, subject: string): Promise<{ identity: SsoIdentity; user: User } | null>
  /** ssoIdentitiesOf: a user's bound identities, by provider. */
  ssoIdentitiesOf(userId: string): Promise<SsoIdentity[]>
  /** bindSsoIdentity binds a provider's subject to an existing user, with its event; false (nothing written) when the subject is bound already, or the user has one at that provider. */
  bindSsoIdentity(identity: NewSsoIdentity, audit: AuditDraft): Promise<boolean>
  /**
   * unbindSsoIdentity removes a user's identity at a provider, with its event, and ends the user's other sessions signed in
   * through it (all but `keepSession`), in one step: `none` when there was none; `last`, nothing written, when it is the user's
   * only way in (no password, no other identity: two unlinks at once leave one).
   */
  unbindSsoIdentity(userId: string, providerId: string, keepSession: string, audit: AuditDraft): Promise<'unbound' | 'none' | 'last'>
  /** createSsoUser makes a user and binds the identity to them in one step, with the event; false (nothing written) when the address or the subject is taken. */
  createSsoUser(user: NewUser, identity: Omit<NewSsoIdentity, 'userId'>, audit: AuditDraft): Promise<boolean>
  /** resealSsoSecret replaces a provider's kept client secret if it is still `from` (a key rotation); false otherwise. */
  resealSsoSecret(id: string, from: string, to: string): Promise<boolean>
  /** touchSsoIdentity records an identity's use and the address the provider gave this time. */
  touchSsoIdentity(providerId: string, subject: string, email: string, nowIso: string): Promise<void>

  /** createSession stores a session by the hash of its id, created and last seen now; `audits` (a sign-in's events) in the same step. */
  createSession(session: NewSession, audits?: readonly AuditDraft[]): Promise<Session>
  /**
   * findSession gives a live session (not expired at `nowIso`, not deleted) and its user, or
   * null. The user comes as they are now: refusing a disabled one is the caller's business.
   */
  findSession(idHash: string, nowIso: string): Promise<{ session: Session; user: User } | null>
  /**
   * touchSession records a live session's use and moves its expiry to `newExpiresIso` (a
   * sliding expiry; never earlier than it was); false when it is gone or expired at
   * `lastSeenIso`. How often to call it is the caller's business.
   */
  touchSession(idHash: string, lastSeenIso: string, newExpiresIso: string): Promise<boolean>
  /**
   * completeTwoFactor marks a session's second factor done, once: false when it was not
   * pending (or is gone). With `newIdHash`, the session takes that id in the same step (a
   * new id at a change of privilege, as OWASP advises: a copy of the pending id is worth nothing).
   * `audits` (the sign-in's events) are written in the same step, only by the completion made.
   */
  completeTwoFactor(idHash: string, newIdHash?: string, audits?: readonly AuditDraft[]): Promise<boolean>
  /** deleteSession signs one session out; false when there was none. */
  deleteSession(idHash: string): Promise<boolean>
  /** deleteSessionsOf signs a user out everywhere (but the session `exceptIdHash`); returns how many. */
  deleteSessionsOf(userId: string, exceptIdHash?: string): Promise<number>
  /** pruneSessions deletes the sessions expired at `nowIso`; returns how many. */
  pruneSessions(nowIso: string): Promise<number>

  /**
   * createToken stores a token by its hash and, in the same step, withdraws the unused ones it
   * replaces (a new link makes the earlier ones dead, as the Copenhagen Book advises): those of
   * the same purpose and account (none but for invitations), and of the same user, or when
   * the token has none, the same email. `audits` (an invitation's event) are written in the same step.
   */
  createToken(token: NewEmailToken, audits?: readonly AuditDraft[]): Promise<EmailToken>
  /**
   * consumeToken uses a token of this purpose, not expired at `nowIso` and not used, and
   * returns it (with usedAt); null otherwise. Atomic: of any number at once, one gets it.
   */
  consumeToken(tokenHash: string, purpose: TokenPurpose, nowIso: string): Promise<EmailToken | null>
  /** findToken: a token of this purpose, not expired at `nowIso` and not used, read only (nothing consumed); null otherwise. */
  findToken(tokenHash: string, purpose: TokenPurpose, nowIso: string): Promise<EmailToken | null>
  /** pendingInvites: an account's invitations neither used nor expired at `nowIso`, oldest first. */
  pendingInvites(accountId: string, nowIso: string): Promise<EmailToken[]>
  /**
   * deleteTokens withdraws tokens (an invitation cancelled) and, when it withdrew any, writes
   * `audit` in the same step; returns how many (0: none was there, and no event).
   */
  deleteTokens(tokenHashes: readonly string[], audit?: AuditDraft): Promise<number>
  /** pruneTokens deletes tokens expired at `nowIso`, or used; returns how many. */
  pruneTokens(nowIso: string): Promise<number>

  /** setRecoveryCodes replaces a user's recovery codes (by their hashes), all at once. */
  setRecoveryCodes(userId: string, codeHashes: readonly string[]): Promise<void>
  /** useRecoveryCode uses an unused code of the user: true once, atomically. */
  useRecoveryCode(userId: string, codeHash: string): Promise<boolean>
  /** recoveryCodesLeft counts a user's unused codes. */
  recoveryCodesLeft(userId: string): Promise<number>
}

export interface AuditQuery {
  readonly accountId?: string
  /** As actorName writes it: `admin-token:ID`, `cli`, … */
  readonly actor?: string
  readonly action?: string
  /** A `next` cursor of an earlier page. */
  readonly cursor?: string
  readonly limit: number
}

/**
 * AuditStore: the trail of every change, newest first. Events are appended (by the access
 * store, with their change, or here for failures) and never changed; only retention removes
 * them, oldest first.
 */
export interface AuditStore {
  append(draft: AuditDraft): Promise<AuditEvent>
  list(query: AuditQuery): Promise<Page<AuditEvent>>
  /** prune deletes the events older than `beforeIso` (retention); returns how many. */
  prune(beforeIso: string): Promise<number>
}

/** AdminTokenStore keeps operators' bearer tokens, by HMAC like API keys. */
export interface AdminTokenStore {
  create(token: AdminToken & { readonly hash: string }, audit: AuditDraft): Promise<void>
  /** find gives the live (not revoked) token of this hash, or null. */
  find(hash: string): Promise<AdminToken | null>
  list(): Promise<AdminToken[]>
  revoke(id: string, audit: AuditDraft): Promise<boolean>
}

export interface OnboardingStore {
  /** upsert replaces the record of the same account, application and user; createdAt stays the first one. */
  upsert(record: Omit<OnboardingRecord, 'createdAt' | 'updatedAt'>, now: Date): Promise<OnboardingRecord>
  get(accountId: string, applicationId: string, userId: string): Promise<OnboardingRecord | null>
  /** findBySecret gives the account's most recently updated record with one of `fingerprints`, or null. */
  findBySecret(accountId: string, fingerprints: readonly string[]): Promise<OnboardingRecord | null>
}

/** What keeping a passkey challenge came to: kept, or refused for the account's cap until `freesAt` (its first open one expires). */
export type ChallengeAdded = { readonly added: true } | { readonly added: false; readonly freesAt: string }

/** A value a rotation must re-seal (idempotency answers, job secrets): the row it belongs to and the value. */
export interface SealedValue<Row> {
  readonly row: Row
  readonly sealed: string
}

/** How many values of one kind each key version seals (by their `vN.` prefix; a key version's count only). */
export type SealCounts = Map<number, number>

/** A factor a rotation must re-seal: where its sealed value belongs, and the value. */
export interface SealedRow {
  readonly id: string
  readonly accountId: string
  readonly userId: string
  readonly sealed: string
}

/**
 * FactorStore keeps managed TOTP factors and the recovery codes of their users, per account.
 * A user exists from their first factor until removed; every change takes its audit event
 * (both or neither), and every limit and single use (factors per user, a recovery code used
 * once, an activation) is decided atomically, across processes and nodes. Pending factors
 * past `expiresAt` are as good as gone: no read returns them, and they are pruned.
 */
export interface FactorStore {
  /**
   * create adds a factor (and the user with their first one), unless there is a live factor of
   * its id already ('exists': an import made before), the user has `maxPerUser` live factors
   * ('limit') or the account `maxPerAccount` factors of all its users ('account_limit': counted
   * in the same step as the write, so parallel creations never pass it; expired pending ones
   * are dropped when it is reached); then nothing is written.
   */
  create(
    factor: Factor,
    maxPerUser: number,
    maxPerAccount: number,
    nowIso: string,
    audit: AuditDraft,
  ): Promise<'created' | 'limit' | 'account_limit' | 'exists'>
  /** factors: the user's live factors, oldest first; null when there is no such user (in this account). */
  factors(accountId: string, userId: string, nowIso: string): Promise<Factor[] | null>
  /** attempting: what an attempt of the user's needs, in one read: their live factors and the account's factor settings; null when there is no such user. */
  attempting(accountId: string, userId: string, nowIso: string): Promise<{ readonly factors: Factor[]; readonly settings: FactorSettings } | null>
  /**
   * attemptingCredential: what a sign-in with a passkey that names no user needs, in one read: the user whose active passkey
   * has the credential digest in this account (never another's), their live factors and the account's factor settings; null
   * when no such passkey.
   */
  attemptingCredential(
    accountId: string,
    credentialDigest: string,
    nowIso: string,
  ): Promise<{ readonly userId: string; readonly factors: Factor[]; readonly settings: FactorSettings } | null>
  /** activate makes a pending, unexpired factor active; false otherwise (nothing written). */
  activate(accountId: string, userId: string, factorId: string, nowIso: string, audit: AuditDraft): Promise<boolean>
  /** setDrift records a factor's clock drift; false when there is no such live factor. */
  setDrift(accountId: string, userId: string, factorId: string, drift: number, nowIso: string, audit: AuditDraft): Promise<boolean>
  /** remove deletes one factor; false when there was none. */
  remove(accountId: string, userId: string, factorId: string, audit: AuditDraft): Promise<boolean>
  /** removeUser deletes a user, their factors and recovery codes; false when there was none. */
  removeUser(accountId: string, userId: string, audit: AuditDraft): Promise<boolean>
  /** setRecoveryCodes replaces a user's recovery codes (by their hashes) all at once; false when there is no such user. */
  setRecoveryCodes(accountId: string, userId: string, codeHashes: readonly string[], nowIso: string, audit: AuditDraft): Promise<boolean>
  /** useRecoveryCode uses an unused code of the user, once however many try at once: the codes left after it, or null (nothing written). */
  useRecoveryCode(accountId: string, userId: string, codeHash: string, nowIso: string, audit: AuditDraft): Promise<number | null>
  recoveryCodesLeft(accountId: string, userId: string): Promise<number>
  /** listUsers pages through an account's users by user id. A malformed cursor throws CursorError. */
  listUsers(accountId: string, query: { readonly cursor?: string; readonly limit: number; readonly nowIso: string }): Promise<Page<TotpUser>>
  /** staleSeals gives up to `limit` factors sealed under another version than `version`, by id after `afterId`. */
  staleSeals(version: number, afterId: string, limit: number): Promise<SealedRow[]>
  /** reseal replaces a factor's sealed value if it is still `from` (a concurrent change wins); false otherwise. */
  reseal(id: string, from: string, to: string, version: number): Promise<boolean>
  /** sealVersions counts factors per key version. */
  sealVersions(): Promise<Map<number, number>>
  /** prune deletes pending factors and passkey challenges expired at `nowIso`; returns how many factors. */
  prune(nowIso: string): Promise<number>
  /**
   * useCredential moves a live passkey's signature counter from `from` to `to`, compare-and-set:
   * of two uses that read the same count, one wins. False when the count is no longer `from`.
   */
  useCredential(accountId: string, userId: string, factorId: string, from: number, to: number): Promise<boolean>
  /**
   * addChallenge keeps a ceremony's challenge (by its digest), in one atomic step: the account's
   * expired ones go, and the user's oldest beyond `maxPerUser` (a challenge of no user, a
   * discoverable sign-in's, is held to the account's cap alone); then, when the account would
   * keep more than `maxPerAccount` open, nothing is written and the answer is when its first
   * open one expires.
   */
  addChallenge(challenge: PasskeyChallenge, maxPerUser: number, maxPerAccount: number, nowIso: string): Promise<ChallengeAdded>
  /**
   * takeChallenge uses a challenge of the account's once, however many answer it at once: it (deleted) when it was there and
   * unexpired at `nowIso`, else null. Another account's challenge is not found (nor used up).
   */
  takeChallenge(accountId: string, digest: string, nowIso: string): Promise<PasskeyChallenge | null>
  /** settings: an account's factor settings (NO_FACTOR_SETTINGS when it set none). */
  settings(accountId: string): Promise<FactorSettings>
  /** setSettings replaces an account's factor settings, with its event. */
  setSettings(accountId: string, settings: Omit<FactorSettings, 'updatedAt'>, nowIso: string, audit: AuditDraft): Promise<void>
}

/**
 * VerificationStore keeps, per verification key (a fingerprint of account + secret), the
 * last accepted time step and the run of failed attempts.
 */
export interface VerificationStore {
  /**
   * settle decides one verification in one atomic step, across processes and nodes (a
   * check and a write in two round trips let parallel guesses through the lockout): while
   * the key is locked, `locked`, and the code's match is not used; else a matching `step`
   * later than the last accepted one is `accepted` (ending the run of failures); else the
   * attempt counts as a failure (`invalid` with no match, `reused` for a step at or before
   * the last accepted one), with the lock the policy calls for. However many arrive at once,
   * at most `policy.maxFailures` failures are answered before the lock.
   */
  settle(key: string, step: number | null, nowMs: number, policy: LockPolicy): Promise<Verdict>
  /** clear forgets a key's run of failures and its lock (an operator's unlock); false when there was none. */
  clear(key: string): Promise<boolean>
  /**
   * lockedUntil tells, reading only (one round trip for all the keys, no write), when the
   * last lock of `keys` ends (epoch ms), or 0 when none is locked at `nowMs`: a caller can
   * refuse before any costly work (a password hash), and refusals cost the store no write.
   */
  lockedUntil(keys: readonly string[], nowMs: number): Promise<number>
  /**
   * forgive takes back one failure of the key's run, atomically: an attempt counted before it
   * was tried (settle with no step) that turned out right, or was never tried. When the run
   * falls below `policy.maxFailures` its lock goes too; the last accepted step stays. False
   * when the run had no failure to take back.
   */
  forgive(key: string, policy: LockPolicy): Promise<boolean>
  /**
   * settleWithin is settle behind attempt limits, in one step: it counts the attempt in each of
   * `limits`' fixed windows of `windowMs` (aligned on multiples of it), in all of them when each
   * has fewer than its `max`, and then settles it; when one window is full, nothing is counted
   * or settled (`limited`, with when that window ends, epoch ms). However many arrive at once,
   * no window admits more than its `max`, across processes and nodes.
   */
  settleWithin(
    key: string,
    step: number | null,
    nowMs: number,
    policy: LockPolicy,
    limits: readonly AttemptLimit[],
    windowMs: number,
  ): Promise<Verdict | Limited>
}

/** Limited: an attempt refused by its limits, untried. */
export interface Limited {
  readonly kind: 'limited'
  readonly retryAtMs: number
}

/** AttemptLimit: a counter of attempts (a keyed digest) and the most its window admits. */
export interface AttemptLimit {
  readonly key: string
  readonly max: number
}

/** windowStart: the start of the fixed window of `windowMs` that `nowMs` falls in. */
export const windowStart = (nowMs: number, windowMs: number): number => Math.floor(nowMs / windowMs) * windowMs

/** UsageStore keeps the durable counts of admitted calls, per account, key, region, UTC day and API group. */
export interface UsageStore {
  /** add adds the counts (summing with what is there), all or nothing. */
  add(rows: readonly UsageRow[]): Promise<void>
  /** report sums an account's counts from `fromDay` to `toDay` (inclusive) per day, key or region, and group. */
  report(accountId: string, fromDay: string, toDay: string, by: UsageBy): Promise<UsageLine[]>
  /** total sums an account's units over all groups from `fromDay` to `toDay` (inclusive). */
  total(accountId: string, fromDay: string, toDay: string): Promise<number>
  /** addRefusals adds the counts of refused calls (summing with what is there), all or nothing. */
  addRefusals(rows: readonly RefusalRow[]): Promise<void>
  /** refusals sums an account's refused calls from `fromDay` to `toDay` (inclusive) per key, region, group and reason: the most first. */
  refusals(accountId: string, fromDay: string, toDay: string): Promise<RefusalLine[]>
}

/**
 * Limiter applies a plan to one call of an account: atomically, it refills the bucket,
 * checks the quota window and the bucket, and takes one token and `cost` units of quota only
 * when both allow it (a refused call consumes nothing; a call is refused when fewer than
 * `cost` units are left). `seed` gives the units already used in the window from the durable
 * usage counts, for a window the limiter has no count of.
 */
export interface Limiter {
  take(accountId: string, plan: Plan, cost: number, seed: (windowStartMs: number, windowEndMs: number) => Promise<number>): Promise<LimitDecision>
}

/** A delivery a worker claimed: everything it needs to send it. */
export interface ClaimedDelivery {
  readonly endpointId: string
  readonly messageId: string
  readonly accountId: string
  readonly url: string
  readonly sealedSecret: string
  readonly eventType: string
  /** When the event happened (ISO). */
  readonly at: string
  readonly data: Readonly<Record<string, unknown>>
  /** Tries since the retry window began, and when it began (epoch ms). */
  readonly tries: number
  readonly sinceMs: number
  /** The traceparent of the span its event was written in (its cause): each attempt is a span of that trace (null: not traced). */
  readonly traceParent: string | null
  /** The claim's token: only its holder's finish changes the delivery. */
  readonly lease: string
}

/** What one attempt came to: `retry` at `nextAtMs`, or done. */
export interface DeliveryResult {
  readonly endpointId: string
  readonly messageId: string
  readonly lease: string
  readonly attempt: { readonly atMs: number; readonly statusCode: number | null; readonly durationMs: number; readonly error: string | null }
  readonly outcome: 'delivered' | 'retry' | 'failed'
  readonly nextAtMs: number
}

/**
 * WebhookStore keeps endpoints and the outbox. Messages and their deliveries are not written
 * here: the store writes them with the audit event they report (an event whose action is an
 * event type, for an account with endpoints that take it), in its transaction. Claims are
 * atomic across processes and nodes: however many workers claim at once, a delivery goes to
 * one, until its lease runs out.
 */
export interface WebhookStore {
  /** createEndpoint: false (nothing written) when the account has `max` live endpoints already. */
  createEndpoint(endpoint: NewWebhookEndpoint, max: number, audit: AuditDraft): Promise<boolean>
  /** listEndpoints: an account's live endpoints, oldest first. */
  listEndpoints(accountId: string): Promise<WebhookEndpoint[]>
  getEndpoint(accountId: string, id: string): Promise<WebhookEndpoint | null>
  /**
   * deleteEndpoint disables it and cancels its pending deliveries; false when there is no such
   * live endpoint. With `deletedKept`, the account's deleted endpoints past that many, those
   * deleted longest ago first, are removed in the same step with their deliveries, attempts and
   * the messages no other delivery holds.
   */
  deleteEndpoint(accountId: string, id: string, audit: AuditDraft, deletedKept?: number): Promise<boolean>
  /** sealedSecrets gives up to `limit` live endpoints' sealed secrets, by id after `afterId` (a key rotation). */
  sealedSecrets(afterId: string, limit: number): Promise<{ readonly id: string; readonly accountId: string; readonly sealed: string }[]>
  /** resealSecret replaces an endpoint's sealed secret if it is still `from` (compare-and-set); false otherwise. */
  resealSecret(id: string, from: string, to: string): Promise<boolean>
  /** listDeliveries pages through an endpoint's deliveries, newest event first. A malformed cursor throws CursorError. */
  listDeliveries(endpointId: string, query: { readonly cursor?: string; readonly limit: number }): Promise<Page<WebhookDelivery>>
  /** resend makes a delivery of a live endpoint due at `nowMs`, its retry window starting again; false when there is none. */
  resend(endpointId: string, messageId: string, nowMs: number, audit: AuditDraft): Promise<boolean>
  /** due tells, reading only, whether a delivery is due at `nowMs` (an idle poll writes nothing). */
  due(nowMs: number): Promise<boolean>
  /** claim takes up to `limit` due deliveries, oldest due first, each leased until `nowMs + leaseMs`. */
  claim(limit: number, nowMs: number, leaseMs: number): Promise<ClaimedDelivery[]>
  /** finish records an attempt and, when the lease is still the caller's, its outcome. */
  finish(result: DeliveryResult): Promise<void>
  /** pending counts the deliveries not yet delivered nor given up. */
  pending(): Promise<number>
  /** prune deletes finished deliveries last changed before `beforeMs`, their attempts, and messages left without deliveries; returns how many deliveries. */
  prune(beforeMs: number): Promise<number>
  /**
   * setPendingCap sets the deliveries an account may have pending (WEBHOOK_PENDING_PER_ACCOUNT) for the outbox trigger,
   * which writes no more of an event's deliveries than there is room for and counts the rest as dropped (the event is kept).
   */
  setPendingCap(max: number): Promise<void>
  /** takeDropped: the deliveries dropped for each account since they were last taken, each taken once across nodes. */
  takeDropped(): Promise<{ readonly accountId: string; readonly deliveries: number }[]>
}

/** What a cancel did, as its event's action: the job stopped, or its kept result deleted (the store decides, in the same step). */
export type JobChange = 'job.cancel' | 'job.result_delete'

/** What submitting a job came to: the job made, the same key's earlier job (same request, or not), or the account's limit. */
export type JobSubmission =
  | { readonly created: ConversionJob }
  | { readonly replayed: ConversionJob }
  | { readonly mismatch: ConversionJob }
  | { readonly limit: number }
  /** The document would take the account's kept bytes (documents waiting, results) past `full`. */
  | { readonly full: number }

/** A job a node claimed: the job, its sealed part and the claim's lease. */
export interface ClaimedJob {
  readonly job: ConversionJob
  readonly sealed: string | null
  readonly lease: string
  /** Whether another node held it before and its lease ran out. */
  readonly reclaimed: boolean
  /** The traceparent it was submitted under: its run's spans join the submission's trace (null: not traced). */
  readonly traceParent: string | null
}

/**
 * How a claimed job ended: its result (kept until `expiresAt`), or its error, and the result
 * it made all the same when there is one (made, but not delivered to its resultUrl).
 */
export type JobEnd =
  | { readonly status: 'succeeded'; readonly result: JobResultInfo; readonly expiresAt: string }
  | { readonly status: 'failed'; readonly error: JobError; readonly result?: JobResultInfo; readonly expiresAt?: string }

export interface JobQuery {
  readonly status?: JobStatus
  /** A `next` cursor of an earlier page. */
  readonly cursor?: string
  readonly limit: number
}

/** The jobs as the metrics see them. */
export interface JobGauges {
  readonly byStatus: Readonly<Record<JobStatus, number>>
  /** When the oldest queued job was submitted (epoch ms), or null. */
  readonly oldestQueuedMs: number | null
  /** Bytes of results kept. */
  readonly resultBytes: number
}

/**
 * JobStore keeps conversion jobs, their documents and their results (in pieces of
 * JOB_CHUNK_BYTES, never whole in one value). Every limit and every claim is decided
 * atomically across processes and nodes: parallel submissions of one Idempotency-Key make one
 * job; an account never has more than its limit queued and running; a job goes to one node
 * at a time, under a lease only its holder can renew, write under or end. A job's end and its
 * event (conversion.succeeded or conversion.failed, which feeds the webhook outbox) commit
 * together, or neither.
 */
export interface JobStore {
  /**
   * submit stores a queued job and its document's pieces, unless: the account used
   * `idempotency.key` since `sinceIso` (its job comes back, `replayed` when the fingerprints
   * match, else `mismatch`), or it has `maxActive` jobs queued and running (`limit`), or the
   * document would take its kept bytes (keptBytes) past `maxBytes` (`full`): decided in the step that writes it.
   */
  submit(job: NewJob, document: readonly Uint8Array[], idempotency: Idempotency | null, maxActive: number, maxBytes?: number): Promise<JobSubmission>
  get(accountId: string, jobId: string): Promise<ConversionJob | null>
  /** list: an account's jobs, newest first. A malformed cursor throws CursorError. */
  list(accountId: string, query: JobQuery): Promise<{ readonly items: ConversionJob[]; readonly next: string | null }>
  /**
   * claim takes the next job for `node`: queued, or running with its lease run out and fewer
   * than `maxAttempts` claims; from the account with the fewest jobs running, the oldest job
   * among equals, skipping accounts with `maxRunning` running. Its earlier result pieces go.
   */
  claim(node: string, nowMs: number, leaseMs: number, maxRunning: number, maxAttempts: number): Promise<ClaimedJob | null>
  /** renew extends a claim's lease and records its progress; false when the claim is no longer the caller's (cancelled, reclaimed). */
  renew(jobId: string, lease: string, nowMs: number, leaseMs: number, pagesDone: number, pagesTotal: number | null): Promise<boolean>
  /** documentPieces: a job's uploaded document, in order. */
  documentPieces(jobId: string): Promise<Uint8Array[]>
  /** writePiece stores the result's piece `seq` under the claim; false when the claim is no longer the caller's. */
  writePiece(jobId: string, lease: string, seq: number, bytes: Uint8Array): Promise<boolean>
  /** resultPiece: piece `seq` of a result written and not gone (the runner reads its own before the job ends), or null. */
  resultPiece(jobId: string, seq: number): Promise<Uint8Array | null>
  /**
   * finish ends a claimed job with its event; false (nothing written) when the claim is no longer the caller's. The document goes, and the result
   * pieces of a job that ended without one. A job that succeeded did all its pages: its pages done and in all are its result's.
   */
  finish(jobId: string, lease: string, end: JobEnd, nowIso: string, audit: AuditDraft): Promise<boolean>
  /**
   * release puts a claimed job back in the queue; its claim counts as an attempt when
   * `attempted` (a worker died on it), not when its node is closing. False when the claim is not the caller's.
   */
  release(jobId: string, lease: string, attempted: boolean): Promise<boolean>
  /**
   * cancel cancels a queued or running job (its node learns at its next renewal), or deletes a
   * finished job's kept result, with the event `audit` drafts for what it did; null when there is
   * no such job or nothing to do.
   */
  cancel(accountId: string, jobId: string, nowIso: string, audit: (action: JobChange) => AuditDraft): Promise<ConversionJob | null>
  /**
   * failSpent fails the running jobs whose lease ran out after `maxAttempts` claims (poison
   * jobs: their conversions kill the nodes or workers that run them), each with `audit(job)`; returns them.
   */
  failSpent(nowMs: number, maxAttempts: number, nowIso: string, error: JobError, audit: (job: ConversionJob) => AuditDraft): Promise<ConversionJob[]>
  /** keptBytes: the bytes of an account's kept results, of the results its running jobs are writing, and of the documents its queued and running jobs hold. */
  keptBytes(accountId: string): Promise<number>
  /** prune deletes results expired at `nowIso` and jobs finished before `beforeIso`; returns how many of each. */
  prune(nowIso: string, beforeIso: string): Promise<{ readonly results: number; readonly jobs: number }>
  gauges(): Promise<JobGauges>
  /** sealedSecrets gives up to `limit` jobs' sealed secrets (queued and running jobs keep them), by id after `afterId` (a key rotation). */
  sealedSecrets(afterId: string, limit: number): Promise<SealedValue<{ readonly id: string; readonly accountId: string }>[]>
  /** resealSecret replaces a job's sealed secrets if they are still `from` (compare-and-set: a job that ended meanwhile keeps none); false otherwise. */
  resealSecret(id: string, from: string, to: string): Promise<boolean>
  /** sealVersions counts jobs' sealed secrets per key version. */
  sealVersions(): Promise<SealCounts>
}

/** An Idempotency-Key's record: the request's fingerprint and, once answered, the answer (sealed). */
export interface IdempotencyRecord {
  readonly fingerprint: string
  /** null: the first request is under way. */
  readonly status: number | null
  readonly sealed: string | null
  readonly leaseUntilMs: number
  readonly expiresMs: number
}

/**
 * IdempotencyStore keeps what an Idempotency-Key was used for, per owner (an account, an
 * admin token), atomically across processes and nodes: of parallel requests with one key,
 * one begins; the others find its record (under way, or answered).
 */
export interface IdempotencyStore {
  /**
   * begin records a request under way (`started`), unless the key has a record that has not
   * expired and whose lease, when it is under way, has not run out: that record then. A new
   * record is one more of the owner's, in the same atomic step: the owner's expired records go
   * first, and when it would then keep more than `caps.rows` records, or more than `caps.bytes`
   * bytes, nothing is written (`full`, with when its first record expires).
   */
  begin(owner: string, key: string, fingerprint: string, nowMs: number, leaseMs: number, ttlMs: number, caps: IdempotencyCaps): Promise<IdempotencyBegun>
  /** finish stores the answer of a request that began (under its lease); false when the record is no longer its own. */
  finish(owner: string, key: string, fingerprint: string, status: number, sealed: string): Promise<boolean>
  /** abandon forgets a request under way that has no answer to keep (a fault): the key is free again. */
  abandon(owner: string, key: string, fingerprint: string): Promise<void>
  get(owner: string, key: string, nowMs: number): Promise<IdempotencyRecord | null>
  /** prune deletes records expired at `nowMs`; returns how many. */
  prune(nowMs: number): Promise<number>
  /** sealedAnswers gives up to `limit` kept answers, by owner and key after `after` (a key rotation). */
  sealedAnswers(after: IdempotencyRef | null, limit: number): Promise<SealedValue<IdempotencyRef & { readonly fingerprint: string }>[]>
  /** resealAnswer replaces a kept answer if it is still `from` (compare-and-set); false otherwise. */
  resealAnswer(ref: IdempotencyRef, from: string, to: string): Promise<boolean>
  /** sealVersions counts kept answers per key version. */
  sealVersions(): Promise<SealCounts>
}

/** An Idempotency-Key record's place: its owner and key. */
export interface IdempotencyRef {
  readonly owner: string
  readonly key: string
}

/** The most an Idempotency-Key owner keeps: records, and their bytes (key, fingerprint and sealed answer). */
export interface IdempotencyCaps {
  readonly rows: number
  readonly bytes: number
}

/** What beginning a request under a key came to (IdempotencyStore.begin). */
export type IdempotencyBegun =
  | { readonly started: true }
  | { readonly started: false; readonly record: IdempotencyRecord }
  | { readonly started: false; readonly full: { readonly freesAtMs: number } }

/** Health of each dependency a store is made of, by name: 'ok' or why not. */
export type Health = Record<string, { readonly ok: boolean; readonly detail: string; readonly essential: boolean }>

/** The store's connections as a scrape sees them (each part only where the store has it). */
export interface StoreGauges {
  readonly postgresPool?: { readonly inUse: number; readonly idle: number; readonly waiting: number; readonly max: number }
  readonly redisConnected?: boolean
}

/** The single sign-on part of the PortalStore, as each store's sso.ts builds it. */
export type SsoOps = Pick<
  PortalStore,
  | 'saveSsoProvider'
  | 'getSsoProvider'
  | 'listSsoProviders'
  | 'deleteSsoProvider'
  | 'createSsoRequest'
  | 'takeSsoRequest'
  | 'pruneSsoRequests'
  | 'findSsoIdentity'
  | 'ssoIdentitiesOf'
  | 'bindSsoIdentity'
  | 'unbindSsoIdentity'
  | 'createSsoUser'
  | 'touchSsoIdentity'
  | 'resealSsoSecret'
>

export interface Store {
  readonly kind: string
  readonly access: AccessStore
  readonly onboarding: OnboardingStore
  readonly factors: FactorStore
  readonly verification: VerificationStore
  readonly usage: UsageStore
  readonly audit: AuditStore
  readonly adminTokens: AdminTokenStore
  readonly portal: PortalStore
  readonly webhooks: WebhookStore
  readonly jobs: JobStore
  readonly idempotency: IdempotencyStore
  /** A limiter shared by every node (Redis), when there is one; otherwise each node limits in process. */
  readonly sharedLimiter: Limiter | null
  /** health asks each dependency; `essential` ones make the node unready when down. */
  health(): Promise<Health>
  /** gauges reads the connections' state without a round trip (for the metrics, at scrape time). */
  gauges(): StoreGauges
  close(): Promise<void>
}
