/**
 * The error reference as Markdown, made from the catalogue: docs/errors.md and the OpenAPI
 * document's description (what the /docs page shows) both carry it, so that a reader of
 * either has every code without the repository.
 */
import { catalogue, ERROR_CODES, type ErrorCode } from './catalogue.ts'

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n+/g, ' ')

/** ERROR_SHAPES explains the two body shapes and the placeholders, before the table. */
export const ERROR_SHAPES = [
  'Two body shapes, as Renda.io had them:',
  '',
  '- **list**: `[{"type":"Error","code":"…","message":"…"}]`: problems with a request; all of them are reported at once.',
  '- **message**: `{"message":"…"}`: gateway answers (403, 404, 429), one field only.',
  '- **coded**: `{"message":"…","code":"…"}`: a lockout or an account\'s conversion limit (429): the `message` Renda.io clients read, as from the gateway\'s 429s, and the code.',
  '',
  '`{name}` in a message is filled in when the error is raised. Any status other than 200 means the call did not do what it was asked: for `verifyOTP`, "not verified".',
].join('\n')

/** errorTable renders one row per catalogue code (or per code of `codes`): status, shape, client message, when it is sent. */
export function errorTable(codes: readonly ErrorCode[] = ERROR_CODES): string {
  const rows = codes.map((code) => {
    const e = catalogue[code]
    return `| \`${code}\` | ${e.status} | ${e.shape} | ${cell(e.message)} | ${cell(e.doc)} |`
  })
  return ['| code | status | shape | message | when |', '| --- | --- | --- | --- | --- |', ...rows].join('\n')
}
