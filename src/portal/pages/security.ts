/**
 * The portal's Security page: change the password, turn two-factor sign-in (the user's own
 * TOTP, with recovery codes) on and off, make new recovery codes, sign out everywhere else;
 * and the second step of signing in (second-factor.ts). After The Copenhagen Book's MFA
 * chapter and OWASP's: a change that weakens the sign-in, or locks its owner out, asks for
 * the password again (a session left open is not enough); a new password or a new second
 * factor ends every other session; secrets and recovery codes are shown once and never logged.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { actorOf, caller, csrfField, formExpired, formOk, pageRoute, sendPage } from '../web/kit.ts'
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../services/users/passwords.ts'
import type { VerifyOutcome } from '../../totp/verify.ts'
import { isFailure } from '../../services/outcome.ts'
import type { Misstep, ProofRefusal } from '../../services/users.ts'
import { enrolmentUrl, grouped, qrDataUrl, RECOVERY_CODE_COUNT, waitWords } from './two-factor.ts'
import { field, rawField, type Problem } from './security-form.ts'
import secondFactorPages from './second-factor.ts'
import { sendToProvider } from './sso.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
section.security { margin-top: 2rem; }
img.qr { image-rendering: pixelated; border: 1px solid var(--line); }
textarea.secret, textarea.codes { display: block; margin-top: .25rem; font: 1.1rem ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; padding: .5rem; resize: none; max-width: 100%; }
textarea.codes { line-height: 1.6; }
`

const NOTICES: Record<string, string> = {
  password: 'Your password is changed, and your other sessions are signed out.',
  '2fa-off': 'Two-factor sign-in is off. Signing in now asks only for your password.',
  unconfirmed: 'Confirm your email address first: two-factor sign-in can be turned on only for a confirmed address.',
  'signed-out-others': 'Every other session is signed out; this one stays.',
  'sso-linked': 'The provider is linked: you can sign in with it.',
  'sso-unlinked': 'The provider is unlinked: it no longer signs you in.',
}

const day = (at: string) => at.slice(0, 10)

/** A form's hidden user name, for password managers to know whose password is asked for. */
const username = (current: Current) => html`<input type="text" name="username" autocomplete="username" value="${current.user.email}" hidden>`

/** securityPage: the Security page, with a notice, or a problem on one of its forms. */
async function securityPage(
  kit: Kit,
  reply: FastifyReply,
  current: Current,
  opts: { status?: number; notice?: string | null; problem?: Problem | null } = {},
): Promise<FastifyReply> {
  const { user } = current
  const problems = opts.problem ? [opts.problem] : []
  const left = user.totpEnabledAt === null ? 0 : await kit.users.sessions.recoveryCodesLeft(user.id)
  const twoFactor =
    user.totpEnabledAt === null
      ? html`
<p><span class="badge off">Off</span> Signing in asks only for your password. With two-factor sign-in it also asks for a code from an authenticator app on your phone (Google Authenticator, 1Password and the like), so that a stolen password alone is not enough.</p>
<form method="post" action="/portal/security/two-factor/setup">
${csrfField(kit, current)}
<button type="submit">Set up two-factor sign-in</button>
</form>`
      : html`
<p><span class="badge ok">On</span> since ${day(user.totpEnabledAt)}: signing in asks for a code from your authenticator app after your password.</p>
<p>${left <= 3 ? html`<span class="badge warn">${left === 0 ? 'None left' : 'Few left'}</span> ` : ''}You have ${left} of ${RECOVERY_CODE_COUNT} recovery codes left. Each signs you in once when you cannot use your app.</p>
<h3>Make new recovery codes</h3>
<form method="post" action="/portal/security/recovery-codes" novalidate>
${csrfField(kit, current)}${username(current)}
${field({ id: 'regen-proof', label: 'Your password, or a code from your app', type: 'password', autocomplete: 'current-password', problems, hint: 'The recovery codes you have now stop working.', extra: html` maxlength="${MAX_PASSWORD_LENGTH}"` })}
<button type="submit" class="secondary">Make new recovery codes</button>
</form>
<h3>Turn off two-factor sign-in</h3>
<form method="post" action="/portal/security/two-factor/off" novalidate>
${csrfField(kit, current)}${username(current)}
${field({ id: 'off-password', label: 'Your password', type: 'password', autocomplete: 'current-password', problems, hint: 'Your recovery codes stop working too.', extra: html` maxlength="${MAX_PASSWORD_LENGTH}"` })}
<button type="submit" class="danger">Turn off two-factor sign-in</button>
</form>`
  const [identities, providers] = await Promise.all([kit.users.sso.identitiesOf(user.id), kit.users.sso.buttons()])
  const linked = new Set(identities.map((i) => i.providerId))
  const unlinked = providers.filter((p) => !linked.has(p.id))
  const sso =
    providers.length === 0 && identities.length === 0
      ? ''
      : html`
<section class="security" aria-labelledby="sso-heading">
<h2 id="sso-heading">Single sign-on</h2>
<p>Sign in through your organisation's identity provider. A provider is linked to you by its own name for you, never by a matching address: link it here, signed in.</p>
${identities.length === 0 ? '' : html`<ul>${identities.map((i) => html`<li>${i.name} (as ${i.email}, last used ${day(i.lastUsedAt)})</li>`)}</ul>`}
${unlinked.length === 0 ? '' : providerForm(kit, current, 'link', unlinked, problems)}
${
  identities.length === 0
    ? ''
    : providerForm(
        kit,
        current,
        'unlink',
        identities.map((i) => ({ id: i.providerId, name: i.name })),
        problems,
      )
}
</section>`
  return sendPage(kit, reply, {
    title: 'Security',
    current,
    status: opts.status ?? 200,
    body: html`
${opts.notice ? html`<p class="notice" role="status">${opts.notice}</p>` : ''}
<section class="security" aria-labelledby="password-heading">
<h2 id="password-heading">Password</h2>
<form method="post" action="/portal/security/password" novalidate>
${csrfField(kit, current)}${username(current)}
${field({ id: 'current-password', label: 'Current password', type: 'password', autocomplete: 'current-password', problems, extra: html` maxlength="${MAX_PASSWORD_LENGTH}"` })}
${field({ id: 'new-password', label: 'New password', type: 'password', autocomplete: 'new-password', problems, hint: `At least ${MIN_PASSWORD_LENGTH} characters; a passphrase of several words is best. Changing it signs out your other sessions.`, extra: html` minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}"` })}
<button type="submit">Change password</button>
</form>
</section>
<section class="security" aria-labelledby="two-factor-heading">
<h2 id="two-factor-heading">Two-factor sign-in</h2>
${twoFactor}
</section>
${sso}
<section class="security" aria-labelledby="sessions-heading">
<h2 id="sessions-heading">Sessions</h2>
<p>Signed in on a computer you no longer use, or one that is not yours? Sign out there from here; this session stays.</p>
<form method="post" action="/portal/security/sign-out-others">
${csrfField(kit, current)}
<button type="submit" class="secondary">Sign out everywhere else</button>
</form>
</section>`,
  })
}

/**
 * providerForm: linking a provider adds a way in, and unlinking one may bring the password back,
 * so both ask for the password or a code first (a user with neither, made by a provider, acts
 * within 10 minutes of signing in through one).
 */
function providerForm(
  kit: Kit,
  current: Current,
  verb: 'link' | 'unlink',
  providers: readonly { id: string; name: string }[],
  problems: readonly Problem[],
): Html {
  const { user } = current
  const proof = user.passwordHash !== null || user.totpEnabledAt !== null
  const ids = { select: `sso-${verb}-provider`, proof: `sso-${verb}-proof` }
  const problem = problems.find((p) => p.field === ids.select)
  return html`<form method="post" action="/portal/security/sso-${verb}" class="sso-link" novalidate>
${csrfField(kit, current)}${username(current)}
<label for="${ids.select}">${verb === 'link' ? 'Provider to link' : 'Provider to unlink'}</label>
${problem === undefined ? '' : html`<p class="error" id="${ids.select}-error" role="alert">${problem.text}</p>`}
<select id="${ids.select}" name="provider">${providers.map((p) => html`<option value="${p.id}">${p.name}</option>`)}</select>
${
  proof
    ? field({
        id: ids.proof,
        label: `${user.passwordHash === null ? 'A code from your app' : user.totpEnabledAt === null ? 'Your password' : 'Your password, or a code from your app'}, to ${verb}`,
        type: 'password',
        autocomplete: 'current-password',
        problems,
        hint: verb === 'link' ? 'Linking adds a way into your account: we ask who you are first.' : 'We ask who you are first.',
        extra: html` maxlength="${MAX_PASSWORD_LENGTH}"`,
      })
    : html`<p class="hint">You have no password here: this works within 10 minutes of signing in through a provider.</p>`
}
<button type="submit" class="secondary">${verb === 'link' ? 'Link provider' : 'Unlink provider'}</button>
</form>`
}

/** lockedOut and wrongCode: the problem to show for a code refused (too many wrong ones: with the wait; wrong, or used already). */
const lockedOut = (reply: FastifyReply, field: string, outcome: Extract<VerifyOutcome, { kind: 'locked' }>): Problem => {
  reply.header('retry-after', String(outcome.retryAfterSeconds))
  return { field, text: `Too many wrong codes. Try again in ${waitWords(outcome.retryAfterSeconds)}.`, status: 429 }
}
const wrongCode = (field: string, outcome: VerifyOutcome): Problem => ({
  field,
  text:
    outcome.kind === 'reused'
      ? 'That code was used already: wait for the next one.'
      : 'That code is not right. Check that the clock of your phone is right, and enter the code your app shows now.',
  status: 422,
})

/** refusedProof: the problem to show for a password or a code not taken (with the wait, when there is one). */
function refusedProof(reply: FastifyReply, fieldId: string, refused: ProofRefusal): Problem {
  if (refused.kind === 'code') return refused.outcome.kind === 'locked' ? lockedOut(reply, fieldId, refused.outcome) : wrongCode(fieldId, refused.outcome)
  const { refusal } = refused
  if (refusal.kind === 'throttled') {
    reply.header('retry-after', String(refusal.wait))
    return { field: fieldId, text: `Too many wrong passwords. Try again in ${waitWords(refusal.wait)}.`, status: 429 }
  }
  if (refusal.lockedFor > 0) reply.header('retry-after', String(refusal.lockedFor))
  return { field: fieldId, text: 'That password is wrong.', status: 422 }
}

/** misstep: where a change that does not apply now leads (back to the page, with a notice for an unconfirmed address). */
const misstep = (reply: FastifyReply, m: Misstep) => reply.redirect(m.kind === 'unconfirmed' ? '/portal/security?notice=unconfirmed' : '/portal/security', 303)

/** The signed-in user (let through by the route's hook) of a genuine form post, or null (the answer sent). */
function formOf(kit: Kit, request: FastifyRequest, reply: FastifyReply): Current | null {
  const current = caller(request)
  if (!formOk(kit, request, current)) {
    formExpired(kit, reply, current, '/portal/security')
    return null
  }
  return current
}

/** enrolPage shows the secret being set up (QR code and text) and the form that turns it on. */
function enrolPage(kit: Kit, reply: FastifyReply, current: Current, secret: string, problem: Problem | null = null): FastifyReply {
  const problems = problem ? [problem] : []
  const qr = qrDataUrl(enrolmentUrl(current.user, secret))
  return sendPage(kit, reply, {
    title: 'Set up two-factor sign-in',
    current,
    status: problem?.status ?? 200,
    body: html`
<p>After your password, signing in will ask for the 6-digit code an authenticator app shows (Google Authenticator, 1Password, Microsoft Authenticator and the like); it changes every 30 seconds.</p>
<h2>1. Add Tessera to your app</h2>
<p>In your app, choose to add an account and scan this QR code.</p>
${qr === null ? '' : html`<img class="qr" src="${qr}" alt="QR code that adds Tessera, for ${current.user.email}, to an authenticator app; the same setup key is written out below">`}
<p>Cannot scan it? Choose to enter a setup key instead, and type this one (time-based, 6 digits, every 30 seconds):</p>
<label for="totp-secret">Setup key</label>
<textarea id="totp-secret" class="secret" readonly rows="1" cols="40" spellcheck="false" autocomplete="off">${grouped(secret)}</textarea>
<p><button type="button" class="secondary" data-copy="totp-secret" hidden>Copy the setup key</button> <span id="totp-secret-status" role="status"></span></p>
<h2>2. Check a code</h2>
<form method="post" action="/portal/security/two-factor/enable" novalidate>
${csrfField(kit, current)}${username(current)}
${field({ id: 'totp-code', label: 'Code from your app', type: 'text', autocomplete: 'one-time-code', problems, hint: 'The 6 digits your app shows for Tessera now.', extra: html` inputmode="numeric" pattern="[0-9 ]*" maxlength="7" spellcheck="false"` })}
${field({ id: 'enable-password', label: 'Your password', type: 'password', autocomplete: 'current-password', problems, extra: html` maxlength="${MAX_PASSWORD_LENGTH}"` })}
<p class="hint">Turning it on signs out your other sessions.</p>
<button type="submit">Turn on two-factor sign-in</button>
</form>
<p><a href="/portal/security">Not now: back to Security</a></p>`,
  })
}

/** codesPage shows new recovery codes, the only time they are shown. */
function codesPage(kit: Kit, reply: FastifyReply, current: Current, title: string, said: string, codes: readonly string[]): FastifyReply {
  const text = `${codes.join('\n')}\n`
  const file = `Tessera recovery codes for ${current.user.email} (each works once):\n\n${text}`
  return sendPage(kit, reply, {
    title,
    current,
    body: html`
<p class="notice" role="status">${said}</p>
<p>If you lose your phone, each of these codes signs you in once in place of a code from your app. Keep them somewhere safe and apart from your phone, in a password manager or on paper. <strong>They are shown only this once.</strong></p>
<label for="recovery-codes">Recovery codes</label>
<textarea id="recovery-codes" class="codes" readonly rows="${codes.length}" cols="12" spellcheck="false" autocomplete="off">${text}</textarea>
<p><button type="button" class="secondary" data-copy="recovery-codes" hidden>Copy the recovery codes</button> <span id="recovery-codes-status" role="status"></span></p>
<p><a download="tessera-recovery-codes.txt" href="data:text/plain;charset=utf-8,${encodeURIComponent(file)}">Download the recovery codes as a text file</a></p>
<p><a href="/portal/security">I have kept them: back to Security</a></p>`,
  })
}

export default async function securityPages(app: FastifyInstance, kit: Kit): Promise<void> {
  passwordPages(app, kit)
  twoFactorPages(app, kit)
  await secondFactorPages(app, kit)
}

/** passwordPages: the Security page itself, changing the password, and signing out everywhere else. */
function passwordPages(app: FastifyInstance, kit: Kit): void {
  const { users } = kit

  app.get<{ Querystring: { notice?: string } }>('/security', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = caller(request)
    const notice = typeof request.query.notice === 'string' ? (NOTICES[request.query.notice] ?? null) : null
    return securityPage(kit, reply, current, { notice })
  })

  app.post('/security/password', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const changed = await users.security.changePassword(
      current,
      { current: rawField(request, 'current-password'), next: rawField(request, 'new-password') },
      request.ip,
    )
    if (isFailure(changed))
      return securityPage(kit, reply, current, {
        status: 422,
        problem: { field: 'new-password', text: `Choose a password of ${changed.message}.`, status: 422 },
      })
    if ('kind' in changed) {
      const problem = refusedProof(reply, 'current-password', changed)
      return securityPage(kit, reply, current, { status: problem.status, problem })
    }
    return reply.redirect('/portal/security?notice=password', 303)
  })

  /** refusedSso: the Security page again with why a link or unlink was not started (who they are not proven). */
  const refusedSso = (reply: FastifyReply, current: Current, verb: 'link' | 'unlink', refused: ProofRefusal | { readonly kind: 'stale' }) => {
    const problem: Problem =
      refused.kind === 'stale'
        ? { field: `sso-${verb}-provider`, text: 'Sign out, sign in through a provider again, then do this within 10 minutes.', status: 403 }
        : refusedProof(reply, `sso-${verb}-proof`, refused)
    return securityPage(kit, reply, current, { status: problem.status, problem })
  }
  const chosen = (request: FastifyRequest) => String(((request.body ?? {}) as Record<string, unknown>).provider ?? '').slice(0, 64)

  app.post('/security/sso-link', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const refused = await users.sso.proveForLink(current, rawField(request, 'sso-link-proof'), request.ip)
    if (refused !== null) return refusedSso(reply, current, 'link', refused)
    const started = await users.sso.start({
      providerId: chosen(request),
      next: '/portal/security?notice=sso-linked',
      ip: request.ip,
      browserHash: current.session.idHash,
      linkUserId: current.user.id,
    })
    return sendToProvider(kit, reply, started)
  })

  app.post('/security/sso-unlink', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const done = await users.sso.unlink(current, chosen(request), rawField(request, 'sso-unlink-proof'), request.ip)
    if (done === true) return reply.redirect('/portal/security?notice=sso-unlinked', 303)
    if ('failure' in done) {
      const problem: Problem = { field: 'sso-unlink-provider', text: `Not unlinked: ${done.message}.`, status: done.failure === 'not_found' ? 404 : 409 }
      return securityPage(kit, reply, current, { status: problem.status, problem })
    }
    return refusedSso(reply, current, 'unlink', done)
  })

  app.post('/security/sign-out-others', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    await users.sessions.signOutOthers(actorOf(current, request), current)
    return reply.redirect('/portal/security?notice=signed-out-others', 303)
  })
}

/** twoFactorPages: turning two-factor sign-in on (a secret kept while totpEnabledAt is null, shown until a code from it is checked) and off, and new recovery codes. */
function twoFactorPages(app: FastifyInstance, kit: Kit): void {
  const { users } = kit

  app.post('/security/two-factor/setup', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const set = await users.security.setUpTwoFactor(current)
    return 'kind' in set ? misstep(reply, set) : reply.redirect('/portal/security/two-factor/setup', 303)
  })

  app.get('/security/two-factor/setup', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = caller(request)
    const { totpSecret, totpEnabledAt, emailVerifiedAt } = current.user
    if (totpSecret === null || totpEnabledAt !== null) return reply.redirect('/portal/security', 303)
    // Nobody proved an unconfirmed address theirs: nobody may put a second factor on it that its owner would be asked for.
    if (emailVerifiedAt === null) return misstep(reply, { kind: 'unconfirmed' })
    return enrolPage(kit, reply, current, totpSecret)
  })

  app.post('/security/two-factor/enable', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const on = await users.security.enableTwoFactor(
      current,
      { password: rawField(request, 'enable-password'), code: rawField(request, 'totp-code') },
      request.ip,
    )
    if ('codes' in on)
      return codesPage(kit, reply, current, 'Two-factor sign-in is on', 'Two-factor sign-in is on, and your other sessions are signed out.', on.codes)
    if (on.kind === 'not-now' || on.kind === 'unconfirmed') return misstep(reply, on)
    return enrolPage(kit, reply, current, current.user.totpSecret!, refusedProof(reply, on.kind === 'password' ? 'enable-password' : 'totp-code', on))
  })

  app.post('/security/recovery-codes', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const made = await users.security.newRecoveryCodes(current, rawField(request, 'regen-proof'), request.ip)
    if ('codes' in made)
      return codesPage(kit, reply, current, 'New recovery codes', 'These are your new recovery codes; the old ones no longer work.', made.codes)
    if (made.kind === 'not-now' || made.kind === 'unconfirmed') return misstep(reply, made)
    const problem = refusedProof(reply, 'regen-proof', made)
    return securityPage(kit, reply, current, { status: problem.status, problem })
  })

  app.post('/security/two-factor/off', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = formOf(kit, request, reply)
    if (current === null) return reply
    const off = await users.security.disableTwoFactor(current, rawField(request, 'off-password'), request.ip)
    if ('off' in off) return reply.redirect('/portal/security?notice=2fa-off', 303)
    if (off.kind === 'not-now' || off.kind === 'unconfirmed') return misstep(reply, off)
    const problem = refusedProof(reply, 'off-password', off)
    return securityPage(kit, reply, current, { status: problem.status, problem })
  })
}
