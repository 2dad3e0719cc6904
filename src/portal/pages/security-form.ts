/** Form pieces of the Security and two-factor pages: a labelled field with its problem, and a raw (untrimmed) field. */
import type { FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'

/** Problem: what is wrong with a form, on which field, and the status of the page that says so. */
export interface Problem {
  readonly field: string
  readonly text: string
  readonly status: number
}

export interface FieldOptions {
  readonly id: string
  readonly label: string
  readonly type: string
  readonly autocomplete: string
  readonly problems?: readonly Problem[]
  readonly hint?: string
  /** More attributes, written after the others. */
  readonly extra?: Html
}

/** field writes one labelled input, with its hint and its problem (an alert) tied to it for screen readers. */
export function field(opts: FieldOptions): Html {
  const problem = opts.problems?.find((p) => p.field === opts.id)
  const described = [opts.hint === undefined ? '' : `${opts.id}-hint`, problem ? `${opts.id}-error` : ''].filter(Boolean).join(' ')
  return html`<label for="${opts.id}">${opts.label}</label>
${opts.hint === undefined ? '' : html`<p class="hint" id="${opts.id}-hint">${opts.hint}</p>`}
${problem ? html`<p class="error" id="${opts.id}-error" role="alert">${problem.text}</p>` : ''}
<input id="${opts.id}" name="${opts.id}" type="${opts.type}" autocomplete="${opts.autocomplete}"${described ? html` aria-describedby="${described}"` : ''}${problem ? html` aria-invalid="true"` : ''}${opts.extra ?? ''}>`
}

/** rawField: a form field as typed (passwords are not trimmed), '' when missing or not text. */
export function rawField(request: FastifyRequest, name: string): string {
  const value = ((request.body ?? {}) as Record<string, unknown>)[name]
  return typeof value === 'string' ? value : ''
}
