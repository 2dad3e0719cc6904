/**
 * The soak's input table: an entry per operationId of the served documents, each with valid,
 * boundary and hostile cases of its own. A new route needs its entry here (docs/development.md):
 * `npm run soak` and test/checks/soak-coverage.test.ts fail without it.
 */
import type { Table } from '../types.ts'
import { ADMIN as ADMIN_API } from './admin.ts'
import { CONVERTER } from './converter.ts'
import { FACTORS } from './factors.ts'
import { JOBS } from './jobs.ts'
import { PASSKEYS } from './passkeys.ts'
import { TOTP } from './totp.ts'

/** The public API's operations (/openapi.json). */
export const PUBLIC: Table = { ...TOTP, ...FACTORS, ...PASSKEYS, ...CONVERTER, ...JOBS }

/** The admin API's operations (/admin/v1/openapi.json on ADMIN_LISTEN). */
export const ADMIN: Table = ADMIN_API
