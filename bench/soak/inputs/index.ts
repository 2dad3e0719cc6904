/**
 * The soak's input table: an entry per operationId of the served documents, each with valid,
 * boundary and hostile cases of its own. A new route needs its entry here (docs/development.md):
 * `npm run soak` and test/checks/soak-coverage.test.ts fail without it.
 */
import type { Table } from '../types.ts'
import { TOTP } from './totp.ts'

/** The public API's operations (/openapi.json). */
export const PUBLIC: Table = { ...TOTP }

/** The admin API's operations (/admin/v1/openapi.json on ADMIN_LISTEN). */
export const ADMIN: Table = {}
