/**
 * The errors plugin turns every failure into a catalogue body: ApiErrors as they are,
 * schema validation failures into one problem per bad field (all at once), Fastify's
 * body errors into 413/415/400, and anything else into a logged 500 with a safe body.
 */
import fp from 'fastify-plugin'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ErrorCode } from './catalogue.ts'
import { ApiError, apiError, errorBody, type Params, type Problem } from './errors.ts'
import type { Config } from '../config/config.ts'
import { UnavailableError } from '../domain/errors.ts'

/** FieldRule names the codes for a missing and for a bad value of one body field, and the values its message names. */
export interface FieldRule {
  readonly required?: ErrorCode
  readonly invalid: ErrorCode
  readonly params?: Params
}
export type FieldRules = Readonly<Record<string, FieldRule>>

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How schema errors of this route's body map to catalogue codes, in report order. */
    fields?: FieldRules
  }
}

interface AjvError {
  keyword: string
  instancePath: string
  params: { missingProperty?: string }
}

function isBlank(value: unknown): boolean {
  return value === undefined || value === null || (typeof value === 'string' && value.trim() === '')
}

/** validationProblems maps ajv errors to one problem per field, in the route's field order. */
export function validationProblems(errors: readonly AjvError[], rules: FieldRules, body: unknown): Problem[] {
  const fields = new Set<string>()
  let malformed = false
  for (const e of errors) {
    // A property missing inside a field (a credential's rawId) is that field's problem; at the top, the missing field's.
    const field = e.instancePath !== '' ? e.instancePath.split('/')[1] : e.keyword === 'required' ? e.params.missingProperty : undefined
    if (field !== undefined && field in rules) fields.add(field)
    else malformed = true
  }
  const values = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
  const problems: Problem[] = []
  for (const [field, rule] of Object.entries(rules)) {
    if (!fields.has(field)) continue
    const code = isBlank(values[field]) && rule.required !== undefined ? rule.required : rule.invalid
    problems.push(rule.params && code === rule.invalid ? { code, params: rule.params } : { code })
  }
  if (malformed || problems.length === 0) problems.push({ code: 'MALFORMED_BODY', params: { contentType: 'a set of fields' } })
  return problems
}

export function sendProblems(reply: FastifyReply, problems: readonly Problem[], status: number, headers: Record<string, string> = {}): FastifyReply {
  return reply.code(status).headers(headers).type('application/json; charset=utf-8').send(errorBody(problems))
}

/** sentNoBody: the request declares a body of no bytes (no length and not chunked, or a length of 0), whatever its type. */
function sentNoBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length']
  return length === '0' || (length === undefined && request.headers['transfer-encoding'] === undefined)
}

/**
 * emptyFields: the problems of an empty set of fields on a route of fields (its required
 * fields missing), or undefined when the route takes an empty set. No body at all, or a body
 * of no bytes of any type, is such a set: the client is told which fields it left out, not
 * that an absent body does not parse. Only on the error path, so fields cost nothing more.
 */
function emptyFields(request: FastifyRequest, rules: FieldRules): Problem[] | undefined {
  const validate = request.getValidationFunction('body')
  if (validate === undefined || validate({}) === true) return undefined
  return validationProblems((validate.errors ?? []) as AjvError[], rules, {})
}

function toApiError(error: FastifyError, request: FastifyRequest, config: Config): ApiError | undefined {
  if (error instanceof ApiError) return error
  if (error instanceof UnavailableError) return apiError('SERVICE_UNAVAILABLE', { what: error.dependency }, { 'retry-after': '5' })
  const rules = request.routeOptions.config.fields
  const bodyError = error.validation
    ? (error as { validationContext?: string }).validationContext === 'body'
    : error.statusCode === 400 || error.statusCode === 415
  if (rules !== undefined && bodyError && sentNoBody(request)) {
    const problems = emptyFields(request, rules)
    if (problems !== undefined) return new ApiError(problems)
  }
  if (error.validation) {
    const rules = request.routeOptions.config.fields ?? {}
    const problems = validationProblems(error.validation as AjvError[], rules, request.body)
    return new ApiError(problems)
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return apiError('BODY_TOO_LARGE', { limit: request.routeOptions.bodyLimit ?? config.bodyLimitBytes })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return apiError('UNSUPPORTED_MEDIA_TYPE')
  }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    const contentType = String(request.headers['content-type'] ?? 'the declared type').split(';')[0]!
    return apiError('MALFORMED_BODY', { contentType })
  }
  return undefined
}

async function errorsPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // A conversion that fails before its first byte has already named its file and pages: a problem is neither.
    reply.removeHeader('content-disposition')
    reply.removeHeader('x-page-count')
    const known = toApiError(error, request, config)
    if (known) {
      if (known.statusCode >= 500) request.log.error({ err: error }, 'request failed')
      return sendProblems(reply, known.problems, known.statusCode, known.headers)
    }
    request.log.error({ err: error }, 'unhandled error')
    return sendProblems(reply, [{ code: 'INTERNAL_ERROR', params: { requestId: request.id } }], 500)
  })

  const notFound = errorBody([{ code: 'ROUTE_NOT_FOUND', params: { docsUrl: config.docsUrl } }])
  app.setNotFoundHandler((_request, reply) => {
    return reply.code(404).type('application/json; charset=utf-8').send(notFound)
  })
}

export default fp(errorsPlugin, { name: 'errors', fastify: '5.x' })
