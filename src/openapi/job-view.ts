/**
 * The job as the public API and the admin API show it (services/jobs.ts `jobView`), one
 * schema for both documents, with its example.
 */
import { Type, type TSchema } from 'typebox'
import { JOB_OPERATIONS, JOB_STATUSES } from '../domain/jobs.ts'
import { IMAGE_FORMATS, TIFF_BIT_DEPTHS, TIFF_COMPRESSIONS } from '../domain/images.ts'
import { TEXT_FORMATS } from '../domain/text.ts'

/** The codes only a job's end gives (its `error`), never an HTTP answer; a job also ends with the conversion routes' own. */
export const JOB_END_CODES = ['SOURCE_FETCH_FAILED', 'RESULT_UPLOAD_FAILED', 'JOB_STORAGE_FULL'] as const

const time = (description?: string) => Type.String(description === undefined ? { format: 'date-time' } : { format: 'date-time', description })
const nullable = <T extends TSchema>(schema: T, description: string) => Type.Union([schema, Type.Null()], { description })

/**
 * ERROR_REFERENCE is where a reader of the public document finds what each code means: the
 * reference page served beside it (`docs` from `/openapi.json` is `/docs`), not a file of the
 * repository, which a server's users do not have.
 */
export const ERROR_REFERENCE = '[error reference](docs#errors)'

/** jobError: a failed job's error, and where the document's readers find what its code means. */
const jobError = (explained: string) =>
  nullable(
    Type.Object({ code: Type.String(), message: Type.String() }),
    `The catalogue error that ended a failed job: one of the conversion routes' (\`PDF_UNREADABLE\`, \`CONVERSION_TIMEOUT\`, …), or of a job alone: ${JOB_END_CODES.map((c) => `\`${c}\``).join(', ')} (${explained}).`,
  )

export const JOB_ID_EXAMPLE = 'job_19a5f3c2b7e4d1a2b3c4d'
export const jobStatus = Type.String({
  enum: [...JOB_STATUSES],
  description: '`queued` → `running` → `succeeded` | `failed`; `cancelled` from queued or running.',
})

/** A job as both APIs show it (services/jobs.ts `jobView`): never a URL the customer gave, nor the password. */
export const jobViewSchema = Type.Object(
  {
    jobID: Type.String({ description: 'The job ID (`job_` and 21 hex digits).' }),
    status: jobStatus,
    operation: Type.String({ enum: [...JOB_OPERATIONS] }),
    options: Type.Object({
      dpi: Type.Integer(),
      pages: nullable(Type.String(), 'The pages asked for; null: all.'),
      colorMode: Type.String({ enum: ['rgb', 'gray'] }),
      image: Type.Optional(
        Type.Object(
          {
            format: Type.String({ enum: [...IMAGE_FORMATS] }),
            width: Type.Optional(Type.Integer()),
            height: Type.Optional(Type.Integer()),
            quality: Type.Optional(Type.Integer()),
            compression: Type.Optional(Type.String({ enum: [...TIFF_COMPRESSIONS] })),
            bitDepth: Type.Optional(Type.Integer({ enum: [...TIFF_BIT_DEPTHS] })),
          },
          { description: "An `image` job's format and the options given for it (absent: PNG)." },
        ),
      ),
      text: Type.Optional(Type.Object({ format: Type.String({ enum: [...TEXT_FORMATS] }) }, { description: "A `text` job's format." })),
      edit: Type.Optional(
        Type.Object(
          { ranges: Type.Optional(Type.String()), every: Type.Optional(Type.Integer()), angle: Type.Optional(Type.Integer({ enum: [90, 180, 270] })) },
          { description: "A `split`'s `ranges` or `every`, a `rotate`'s `angle` (clockwise)." },
        ),
      ),
      merge: Type.Optional(
        Type.Object(
          { pages: Type.Array(nullable(Type.String(), 'all')) },
          { description: "A `merge`'s pages of each document, in order (null: all); `pages` is then null." },
        ),
      ),
      compress: Type.Optional(
        Type.Object({ preset: Type.String({ enum: ['screen', 'ebook', 'printer', 'prepress'] }) }, { description: "A `compress` job's preset." }),
      ),
    }),
    source: Type.String({ enum: ['upload', 'url'], description: 'Uploaded with the job, or fetched from its sourceUrl (never shown).' }),
    resultUrl: Type.Boolean({ description: 'Whether the result is also sent to a resultUrl (the URL itself is never shown).' }),
    metadata: nullable(Type.Object({}, { additionalProperties: true }), "The customer's own object, echoed in the job and its events."),
    pagesDone: Type.Integer(),
    pagesTotal: nullable(Type.Integer(), 'Pages to convert, once the document has been read.'),
    attempts: Type.Integer({ description: 'Runs so far (a job whose node died is run again).' }),
    createdAt: time('When it was submitted.'),
    startedAt: nullable(time(), 'When it first ran.'),
    finishedAt: nullable(time(), 'When it ended.'),
    result: nullable(
      Type.Object({
        url: Type.String({ description: "Its download on the public API (with the account's API key)." }),
        size: Type.Integer({ description: 'Bytes.' }),
        type: Type.String({
          description: 'image/png, image/jpeg, image/webp, image/tiff, application/zip, application/postscript, application/json or text/plain.',
        }),
        name: Type.String(),
        pages: Type.Integer(),
        expiresAt: time('When the kept result is deleted (`JOB_RESULT_TTL_SECONDS`).'),
      }),
      'The kept result; null before, after its expiry or deletion, or when there is none.',
    ),
    resultGone: Type.Boolean({ description: 'A result was made and has expired or been deleted.' }),
    error: jobError(`the ${ERROR_REFERENCE} says what each means`),
  },
  {
    examples: [
      {
        jobID: JOB_ID_EXAMPLE,
        status: 'succeeded',
        operation: 'image',
        options: { dpi: 150, pages: null, colorMode: 'rgb' },
        source: 'upload',
        resultUrl: false,
        metadata: { invoice: 'INV-7' },
        pagesDone: 4,
        pagesTotal: 4,
        attempts: 1,
        createdAt: '2026-11-23T09:30:00.120Z',
        startedAt: '2026-11-23T09:30:00.412Z',
        finishedAt: '2026-11-23T09:30:02.874Z',
        result: {
          url: `https://eu.example.com/converter/jobs/${JOB_ID_EXAMPLE}/result`,
          size: 48211,
          type: 'application/zip',
          name: 'Report_2026.zip',
          pages: 4,
          expiresAt: '2026-11-24T09:30:02.874Z',
        },
        resultGone: false,
        error: null,
      },
    ],
  },
)

/**
 * adminJobViewSchema: the same job in the admin document, whose reference lists the admin API's
 * codes only: a job's codes are the public API's, explained in its reference.
 */
export const adminJobViewSchema = Type.Object(
  { ...jobViewSchema.properties, error: jobError("the public API's reference, `/docs#errors` on the public listener, says what each means") },
  { examples: (jobViewSchema as { examples?: unknown[] }).examples },
)
