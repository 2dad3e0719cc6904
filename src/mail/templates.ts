/**
 * The portal's emails, each a subject, a plain-text body and an HTML body. The HTML is the
 * text's twin in plain markup (no styles, scripts or remote images, so that it reads the same
 * in every client and loads nothing), with every value escaped. Subjects say what the email
 * is and name the product; every link's email says how long the link works.
 */

/** The product's name, in every subject and signature. */
export const PRODUCT = 'Tessera'

export interface Email {
  readonly subject: string
  readonly text: string
  readonly html: string
}

/** escapeHtml makes a value safe in HTML text and in a double-quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** oneLine keeps a value given by a user (an account name) on one line of a subject or of the text. */
const oneLine = (value: string): string => value.replace(/\s+/g, ' ').trim()

/** duration writes a link's lifetime in words: "30 minutes", "24 hours", "7 days". */
export function duration(ms: number): string {
  const minutes = Math.max(1, Math.round(ms / 60_000))
  const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`
  if (minutes < 120 && minutes % 60 !== 0) return plural(minutes, 'minute')
  const hours = Math.round(minutes / 60)
  if (hours < 48 || hours % 24 !== 0) return plural(hours, 'hour')
  return plural(hours / 24, 'day')
}

/** A paragraph of the body: text, or a link to show as itself. */
type Part = string | { readonly link: string }

/** compose builds the text and HTML bodies from the same paragraphs, and signs both. */
function compose(subject: string, parts: readonly Part[]): Email {
  const all: Part[] = [...parts, `— ${PRODUCT}`]
  const text = `${all.map((p) => (typeof p === 'string' ? p : p.link)).join('\n\n')}\n`
  const paragraphs = all.map((p) => (typeof p === 'string' ? `<p>${escapeHtml(p)}</p>` : `<p><a href="${escapeHtml(p.link)}">${escapeHtml(p.link)}</a></p>`))
  const html = [
    '<!doctype html>',
    '<html lang="en">',
    `<head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(subject)}</title></head>`,
    '<body>',
    ...paragraphs,
    '</body>',
    '</html>',
    '',
  ].join('\n')
  return { subject, text, html }
}

const ignore = 'If you did not ask for this, ignore this email: nothing changes.'

/** verifyEmail: the link that confirms a new account's address. */
export function verifyEmail(input: { readonly link: string; readonly validForMs: number }): Email {
  return compose(`Confirm your email address for ${PRODUCT}`, [
    `To finish signing up for ${PRODUCT}, confirm your email address by opening this link:`,
    { link: input.link },
    `The link works once and expires in ${duration(input.validForMs)}. Confirming asks for the password you chose when you signed up (the last time, if you signed up more than once).`,
    ignore,
  ])
}

/** resetPassword: the link that sets a new password. */
export function resetPassword(input: { readonly link: string; readonly validForMs: number }): Email {
  return compose(`Reset your ${PRODUCT} password`, [
    `Someone (we hope you) asked to reset the password of your ${PRODUCT} account. Choose a new one by opening this link:`,
    { link: input.link },
    `The link works once and expires in ${duration(input.validForMs)}.`,
    'If you did not ask for this, ignore this email: your password stays as it is.',
  ])
}

/** invitation: an account's member invites someone to join it with a role. */
export function invitation(input: {
  readonly accountName: string
  readonly role: string
  readonly inviter: string
  readonly link: string
  readonly validForMs: number
}): Email {
  const account = oneLine(input.accountName)
  const inviter = oneLine(input.inviter)
  return compose(`${inviter} invited you to ${account} on ${PRODUCT}`, [
    `${inviter} invited you to join the team ${account} on ${PRODUCT}, as ${oneLine(input.role)}.`,
    'To accept, open this link (you can create your sign-in there if you have none):',
    { link: input.link },
    `The invitation works once and expires in ${duration(input.validForMs)}.`,
    'If you do not know the sender, ignore this email.',
  ])
}

/** operatorInvitation: an operator of the node (the CLI, an admin token) invites someone to be an operator. */
export function operatorInvitation(input: { readonly portalUrl: string; readonly link: string; readonly validForMs: number }): Email {
  return compose(`You are invited to operate ${PRODUCT}`, [
    `You are invited to be an operator of ${PRODUCT} at ${oneLine(input.portalUrl)}: an operator sees and acts in every account from the portal.`,
    'To accept, open this link (you can create your sign-in there if you have none):',
    { link: input.link },
    `The invitation works once and expires in ${duration(input.validForMs)}. Keep it to yourself: whoever holds the link can accept it for this address.`,
    'If you do not expect this, ignore this email: nothing changes.',
  ])
}

/** signupAwaitingApproval: to the new user, when an operator approves sign-ups (SIGNUP_MODE=approval). */
export function signupAwaitingApproval(input: { readonly portalUrl: string }): Email {
  return compose(`Your ${PRODUCT} sign-up is awaiting approval`, [
    `Thank you for signing up for ${PRODUCT}. Your address is confirmed; an operator approves each new account before it can be used.`,
    'You can sign in to see where yours stands:',
    { link: input.portalUrl },
  ])
}

/** signupToApprove: to the operators, when a confirmed sign-up waits for them (SIGNUP_MODE=approval). */
export function signupToApprove(input: { readonly email: string; readonly accountName: string; readonly link: string }): Email {
  const email = oneLine(input.email)
  return compose(`New ${PRODUCT} sign-up to approve: ${email}`, [
    `${email} signed up for ${PRODUCT} (account ${oneLine(input.accountName)}) and confirmed the address. The account waits for an operator to approve or refuse it:`,
    { link: input.link },
  ])
}

/** alreadyRegistered: someone signed up with an address that has an account already (the page said "check your inbox" either way). */
export function alreadyRegistered(input: { readonly signInUrl: string; readonly resetUrl: string }): Email {
  return compose(`You already have a ${PRODUCT} account`, [
    `Someone (we hope you) tried to sign up for ${PRODUCT} with this address, which already has an account. Sign in here:`,
    { link: input.signInUrl },
    'Forgot the password? Choose a new one here:',
    { link: input.resetUrl },
    'If it was not you, ignore this email: nothing changes.',
  ])
}

/** signupApproved: to a new user, when an operator approved their sign-up (SIGNUP_MODE=approval). */
export function signupApproved(input: { readonly signInUrl: string }): Email {
  return compose(`Your ${PRODUCT} account is approved`, [
    `Good news: an operator approved your sign-up for ${PRODUCT}. You can sign in now:`,
    { link: input.signInUrl },
  ])
}
