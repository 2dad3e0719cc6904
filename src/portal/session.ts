/**
 * The session helpers live in web/session.ts; this re-export keeps services/team.ts's import
 * working until that file names web/session.ts itself (it is outside the portal's helpers' files).
 */
export { isToken, newSessionToken, sessionIdHash } from './web/session.ts'
