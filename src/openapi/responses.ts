/**
 * errorResponses builds the error part of a route's `response` schema from catalogue codes:
 * one entry per status, its body shape, the codes as an enum and their messages in the
 * description. The OpenAPI document is generated from these, so it names every code a
 * route can answer.
 */
import { Type } from 'typebox'
import { catalogue, type ErrorCode } from '../errors/catalogue.ts'

/** Codes any guarded route can answer, besides its own. */
export const COMMON_CODES: readonly ErrorCode[] = ['ACCESS_DENIED', 'THROTTLED', 'QUOTA_EXCEEDED', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE']
/** Codes any route with a body can answer. */
export const BODY_CODES: readonly ErrorCode[] = ['MALFORMED_BODY', 'BODY_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE']

export function errorResponses(codes: readonly ErrorCode[], options: { body?: boolean; common?: readonly ErrorCode[] } = {}) {
  const all = [...codes, ...(options.body === false || codes.length === 0 ? [] : BODY_CODES), ...(options.common ?? COMMON_CODES)]
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of all) {
    const status = catalogue[code].status
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  const out: Record<number, unknown> = {}
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const description = list.map((c) => `\`${c}\`: ${catalogue[c].message}`).join('\n\n')
    // A status answers in one shape: `message` and `coded` are the same object, `code` present for the coded ones.
    const coded = list.filter((c) => catalogue[c].shape === 'coded')
    // A client reads a status's body one way: a list code beside a message one would be answered in a shape the document does not describe.
    const lists = list.filter((c) => catalogue[c].shape === 'list')
    if (lists.length > 0 && lists.length < list.length) throw new Error(`status ${status} mixes body shapes: ${list.join(', ')}`)
    out[status] =
      catalogue[list[0]!].shape !== 'list'
        ? Type.Object(
            { message: Type.String(), ...(coded.length === 0 ? {} : { code: Type.Optional(Type.String({ enum: coded })) }) },
            { description, 'x-error-codes': list },
          )
        : Type.Array(
            Type.Object({
              type: Type.Literal('Error'),
              code: Type.String({ enum: list }),
              message: Type.String(),
            }),
            { description, 'x-error-codes': list },
          )
  }
  return out
}
