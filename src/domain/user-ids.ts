/**
 * The user IDs of managed TOTP factors (`/totp/users/{userID}`): the one rule every door
 * applies (the API, the admin API, the CLI, the operator pages). Imports nothing of ours.
 *
 * An ID is compared in Unicode NFC, so `é` typed precomposed or as `e` + accent is one user.
 * It must be 1 to 256 characters (in NFC), not blank, not `.` or `..` (a URL path resolves
 * them: a link to user `..` leads elsewhere), and hold no `:` (the otpauth label's separator),
 * no control character, no format character (bidi overrides and isolates such as U+202E and
 * U+2066, zero-width U+200B…: they make two IDs look alike or an ID read backwards), no lone
 * surrogate and no line or paragraph separator.
 */

export const MAX_USER_ID_LENGTH = 256

/**
 * MAX_USER_ID_INPUT bounds an ID as given, in code points, before its NFC form is counted: a
 * character may come decomposed (four code points at most: a base and its marks, a Hangul
 * syllable as its jamo), so an ID the rule accepts is at most four times MAX_USER_ID_LENGTH.
 */
export const MAX_USER_ID_INPUT = 4 * MAX_USER_ID_LENGTH

/**
 * MAX_USER_ID_PATH_LENGTH bounds a user ID as a path segment, percent-escapes and all: each code
 * point of MAX_USER_ID_INPUT at most 4 bytes of UTF-8, each byte 3 characters escaped. The
 * router is given it (http/base.ts: Fastify's own bound, 100, refused IDs the rule accepts);
 * the rule itself is canonicalUserId's, applied after the path decodes.
 */
export const MAX_USER_ID_PATH_LENGTH = MAX_USER_ID_INPUT * 4 * 3

/** The longest cursor of a list of users: a user ID of MAX_USER_ID_LENGTH characters, 4 bytes each in UTF-8, in base64url. */
export const MAX_USER_CURSOR = Math.ceil((MAX_USER_ID_LENGTH * 4 * 4) / 3)

/** USER_ID_RULE says the rule in words, for answers and documents. */
export const USER_ID_RULE = `1 to ${MAX_USER_ID_LENGTH} characters (compared in Unicode NFC), not blank, not "." or "..", without ":", control, format (bidi, zero-width) or line-separator characters`

const REFUSED = /[:\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u

/** canonicalUserId gives the NFC form of an ID the rule accepts, or null. */
export function canonicalUserId(raw: unknown): string | null {
  if (typeof raw !== 'string' || !raw.isWellFormed()) return null
  // ASCII is its own NFC: the usual ID costs no normalisation.
  const id = /^[\x20-\x7e]*$/.test(raw) ? raw : raw.normalize('NFC')
  if (id.trim() === '' || id === '.' || id === '..' || REFUSED.test(id)) return null
  let length = 0
  for (const _ of id) if (++length > MAX_USER_ID_LENGTH) return null
  return id
}
