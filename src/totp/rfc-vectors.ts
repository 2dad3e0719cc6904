/** Test vectors of the RFCs, shared by the core and the HTTP tests. */
import type { Algorithm } from '../domain/accounts.ts'

/** RFC 6238 Appendix B: the seeds and the 8-digit codes at each time. */
export const RFC6238_SEEDS: Record<Algorithm, string> = {
  SHA1: '12345678901234567890',
  SHA256: '12345678901234567890123456789012',
  SHA512: '1234567890123456789012345678901234567890123456789012345678901234',
}
export const RFC6238_VECTORS: readonly [number, Record<Algorithm, string>][] = [
  [59, { SHA1: '94287082', SHA256: '46119246', SHA512: '90693936' }],
  [1111111109, { SHA1: '07081804', SHA256: '68084774', SHA512: '25091201' }],
  [1111111111, { SHA1: '14050471', SHA256: '67062674', SHA512: '99943326' }],
  [1234567890, { SHA1: '89005924', SHA256: '91819424', SHA512: '93441116' }],
  [2000000000, { SHA1: '69279037', SHA256: '90698825', SHA512: '38618901' }],
  [20000000000, { SHA1: '65353130', SHA256: '77737706', SHA512: '47863826' }],
]
/** RFC 4226 Appendix D: HOTP codes for counters 0 to 9 of the SHA1 seed. */
export const RFC4226_CODES = ['755224', '287082', '359152', '969429', '338314', '254676', '287922', '162583', '399871', '520489']
