/**
 * The second step of signing in. A correct password with two-factor sign-in on gives a
 * pending session (10 minutes, allowed nothing but this page); a code from the user's app,
 * or one of their recovery codes, completes it. Completion gives the session a new id in the
 * same atomic step that marks it done (a copy of the pending cookie is worth nothing), and
 * the full lifetime. Guesses are counted and locked in the verification store, across nodes.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { caller, formField, LANDING, formOk, pageRoute, sendPage, sessionOf } from '../web/kit.ts'
import { safeNext } from './auth.ts'
import { csrfToken, SESSION_COOKIE, setCookie } from '../web/session.ts'
import { RECOVERY_CODE_COUNT, waitWords } from './two-factor.ts'
import { field, type Problem } from './security-form.ts'

const iso = (ms: number) => new Date(ms).toISOString()

/** `?next=` for a page that leads on to `next` (nothing for the home page). */
const nextQuery = (next: string) => (next === LANDING ? '' : `?next=${encodeURIComponent(next)}`)

/** The page of the second step: a code from the app, or a recovery code; and a way out. */
function stepPage(kit: Kit, reply: FastifyReply, current: Current, next: string, problem: Problem | null = null): FastifyReply {
  const problems = problem ? [problem] : []
  const csrf = html`<input type="hidden" name="_csrf" value="${csrfToken(kit.pepper, current.session.idHash)}">`
  const keepNext = next === LANDING ? '' : html`<input type="hidden" name="next" value="${next}">`
  return sendPage(kit, reply, {
    title: 'Two-factor sign-in',
    status: problem?.status ?? 200,
    body: html`
<p>Signing in as ${current.user.email}. Open your authenticator app and enter the code it shows for Tessera.</p>
<form method="post" action="/portal/two-factor" novalidate>
${csrf}${keepNext}
${field({ id: 'code', label: 'Authentication code', type: 'text', autocomplete: 'one-time-code', problems, hint: '6 digits; a new one every 30 seconds.', extra: html` inputmode="numeric" pattern="[0-9 ]*" maxlength="7" spellcheck="false"` })}
<button type="submit">Verify</button>
</form>
<h2>Cannot use your app?</h2>
<form method="post" action="/portal/two-factor" novalidate>
${csrf}${keepNext}
${field({ id: 'recovery', label: 'Recovery code', type: 'text', autocomplete: 'off', problems, hint: 'One of the codes you kept when you turned on two-factor sign-in, like abcd-efgh. Each works once.', extra: html` maxlength="20" spellcheck="false" autocapitalize="none"` })}
<button type="submit" class="secondary">Sign in with the recovery code</button>
</form>
<p>Lost your phone and your recovery codes? Your operator can help.</p>
<form method="post" action="/portal/sign-out" class="inline">
${csrf}
<button type="submit" class="link">Cancel and sign out</button>
</form>`,
  })
}

/** The signed-in-with-a-password session of a request, or null after sending where to go instead. */
async function pendingOf(kit: Kit, request: FastifyRequest, reply: FastifyReply, next: string): Promise<Current | null> {
  const current = await sessionOf(kit, request, { pendingToo: true })
  if (current === null) await reply.redirect(`/portal/sign-in${nextQuery(next)}`, 303)
  else if (!current.session.twoFactorPending) await reply.redirect(next, 303)
  else if (current.user.totpEnabledAt === null || current.user.totpSecret === null) {
    // Turned off from another session meanwhile: this one signs in again from the start.
    await kit.users.sessions.endPending(current)
    await reply.redirect(`/portal/sign-in${nextQuery(next)}`, 303)
  } else return current
  return null
}

export default async function secondFactorPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { users, now } = kit
  const secure = kit.config.portalSecureCookies
  app.get<{ Querystring: { next?: string } }>('/two-factor', { schema: { hide: true } }, async (request, reply) => {
    const next = safeNext(request.query.next)
    const current = await pendingOf(kit, request, reply, next)
    return current === null ? reply : stepPage(kit, reply, current, next)
  })

  app.post('/two-factor', { schema: { hide: true } }, async (request, reply) => {
    const next = safeNext(formField(request, 'next'))
    const current = await pendingOf(kit, request, reply, next)
    if (current === null) return reply
    if (!formOk(kit, request, current)) {
      return stepPage(kit, reply, current, next, {
        field: 'code',
        text: 'This form has expired or did not come from this site. Please enter the code again.',
        status: 403,
      })
    }
    const recovery = formField(request, 'recovery')
    const factor = recovery === '' ? 'totp' : 'recovery-code'
    const fieldId = recovery === '' ? 'code' : 'recovery'
    const outcome = await users.sessions.secondFactor(current, { code: formField(request, 'code'), recovery }, request.ip)
    if (outcome.kind === 'locked') {
      kit.metrics.signIn('throttled')
      reply.header('retry-after', String(outcome.retryAfterSeconds))
      const at = iso(now() + outcome.retryAfterSeconds * 1000).slice(11, 16)
      return stepPage(kit, reply, current, next, {
        field: fieldId,
        text: `Too many wrong codes. Try again in ${waitWords(outcome.retryAfterSeconds)} (after ${at} UTC).`,
        status: 429,
      })
    }
    if (outcome.kind === 'wrong') {
      kit.metrics.signIn('wrong second factor')
      const text =
        factor === 'recovery-code'
          ? 'That recovery code is not right, or was used already.'
          : outcome.reused
            ? 'That code was used already. Wait for the next one.'
            : 'That code is not right. Enter the code your app shows now.'
      return stepPage(kit, reply, current, next, { field: fieldId, text, status: 401 })
    }
    if (outcome.kind === 'gone') return reply.redirect(`/portal/sign-in${nextQuery(next)}`, 303)
    kit.metrics.signIn('ok')
    reply.header('set-cookie', setCookie(SESSION_COOKIE, outcome.token, secure, Math.floor(kit.sessionTtlMs / 1000)))
    return reply.redirect(factor === 'recovery-code' ? `/portal/two-factor/recovered${nextQuery(next)}` : next, 303)
  })

  app.get<{ Querystring: { next?: string } }>('/two-factor/recovered', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = caller(request)
    const left = await users.sessions.recoveryCodesLeft(current.user.id)
    return sendPage(kit, reply, {
      title: 'Signed in with a recovery code',
      current,
      body: html`
<p class="${left <= 3 ? 'error' : 'notice'}" role="status">You are signed in. That recovery code cannot be used again: you have ${left} of ${RECOVERY_CODE_COUNT} left.</p>
<p>${left <= 3 ? 'Make new ones soon, ' : 'If you have lost your phone, '}on the <a href="/portal/security">Security page</a>: with your password you can make new recovery codes, or turn two-factor sign-in off and set it up again on a new phone.</p>
<p><a href="${safeNext(request.query.next)}">Continue</a></p>`,
    })
  })
}
