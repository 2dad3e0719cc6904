/** Route schemas of the conversion jobs, for the OpenAPI document (bodies and queries are checked by the service and the routes). */
import { Type } from 'typebox'
import { errorResponses } from '../openapi/responses.ts'
import type { ErrorCode } from '../errors/catalogue.ts'
import { JOB_OPERATIONS, JOB_STATUSES } from '../domain/jobs.ts'
import { JOB_ID_EXAMPLE, jobViewSchema as jobView } from '../openapi/job-view.ts'
import { IMAGE_CODES, imageContent, imageFields } from './schemas.ts'
import { IMAGE_FORMATS } from '../domain/images.ts'
import { TEXT_FORMATS } from '../domain/text.ts'

const JOB_ID = Type.String({ description: 'The job ID (`job_` and 21 hex digits).', examples: [JOB_ID_EXAMPLE] })
const params = Type.Object({ jobID: JOB_ID })

const fields = {
  operation: Type.String({
    enum: [...JOB_OPERATIONS],
    description:
      '`image`: an image, or a zip of images (one multi-page TIFF) for several pages, as `generateImage`, with its `format` and options; `postscript` (as `generatePostscript`); `text` (as `extractText`, with its `format`); `merge` (2 to 20 `pdfDocument` parts, with `pages` and `password` once per document, as the route takes them; no `sourceUrl`), `split`, `rotate`, `flatten`, `compress` (as their routes: a compression never larger than the document).',
  }),
  pages: Type.Optional(Type.String({ description: "Pages to convert, e.g. '1-3,5,9-' (default: all)." })),
  ...imageFields,
  ranges: Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.String())], {
      description:
        '`split` (or `every`): a page selection a PDF: a list (JSON), the field sent once per part (a form), or one text with the parts separated by semicolons (`1-3;4-6;7-`).',
    }),
  ),
  every: Type.Optional(Type.Integer({ minimum: 1, description: '`split`: pages a PDF (or `ranges`).' })),
  preset: Type.Optional(Type.String({ enum: ['screen', 'ebook', 'printer', 'prepress'], description: "`compress`: pdfwrite's preset (default `ebook`)." })),
  angle: Type.Optional(Type.Integer({ enum: [90, 180, 270, -90, -180, -270], description: '`rotate`: the quarter turns, clockwise.' })),
  format: Type.Optional(
    Type.String({
      enum: [...IMAGE_FORMATS, ...TEXT_FORMATS],
      description: "`image`: the image format (`png` by default), as `generateImage`'s; `text`: `json` (default), `text` or `structured`, as `extractText`'s.",
    }),
  ),
  colorMode: Type.Optional(Type.String({ enum: ['rgb', 'gray'], default: 'rgb' })),
  password: Type.Optional(Type.String({ maxLength: 256, description: 'Password of an encrypted PDF (kept sealed until the job runs, then dropped).' })),
  sourceUrl: Type.Optional(
    Type.String({
      format: 'uri',
      description:
        'An `https` URL the document is fetched from when the job runs, instead of `pdfDocument` (public hosts only; redirects are followed three times at most, each checked; at most `JOB_MAX_DOCUMENT_BYTES`).',
    }),
  ),
  resultUrl: Type.Optional(
    Type.String({
      format: 'uri',
      description:
        'An `https` URL that receives the result by `PUT` once it is made, with its Content-Length and Content-Type (a presigned S3, GCS or Azure Blob URL). The job succeeds once it has arrived; kept sealed, never shown again.',
    }),
  ),
}

const METADATA = Type.Object({}, { additionalProperties: true, description: 'Any JSON object of yours (at most 4 KiB), echoed in the job and its events.' })

const accepted = Type.Object(
  {
    jobID: JOB_ID,
    status: Type.String({ enum: [...JOB_STATUSES] }),
    statusUrl: Type.String(),
  },
  { examples: [{ jobID: 'job_19a5f3c2b7e4d1a2b3c4d', status: 'queued', statusUrl: 'https://eu.example.com/converter/jobs/job_19a5f3c2b7e4d1a2b3c4d' }] },
)

const SUBMIT_CODES: ErrorCode[] = [
  'JOB_SOURCE_REQUIRED',
  'NOT_A_PDF',
  'OPERATION_INVALID',
  ...IMAGE_CODES,
  'TEXT_FORMAT_INVALID',
  'SPLIT_PARTS_REQUIRED',
  'SPLIT_EVERY_INVALID',
  'SPLIT_RANGES_INVALID',
  'ANGLE_INVALID',
  'OPTION_NOT_TAKEN',
  'PRESET_INVALID',
  'MERGE_DOCUMENTS_REQUIRED',
  'MERGE_FIELDS_MISMATCH',
  'MERGE_DOCUMENT_REFUSED',
  'PAGES_INVALID',
  'COLOR_MODE_INVALID',
  'PASSWORD_INVALID',
  'SOURCE_URL_INVALID',
  'RESULT_URL_INVALID',
  'METADATA_INVALID',
  'IDEMPOTENCY_KEY_INVALID',
  'IDEMPOTENCY_KEY_REUSED',
  'FILE_TOO_LARGE',
  'TOO_MANY_PARTS',
  'JOBS_PER_ACCOUNT',
  'JOB_STORAGE_FULL',
  'JOB_UPLOADS_PER_ACCOUNT',
  'JOB_UPLOADS_BUSY',
]

export const submitJobSchema = {
  operationId: 'submitConversionJob',
  summary: 'Submit a conversion job: a document (or its URL) converted later, its result kept for download and sent where you say',
  description:
    "Answers at once with the job's ID; the job runs on whichever node has a free worker. Poll `statusUrl`, or take the signed `conversion.succeeded` / `conversion.failed` webhook event. Multipart with `pdfDocument` (and the fields below as form fields; `metadata` as JSON text), or JSON / a urlencoded form with `sourceUrl`. With an `Idempotency-Key` header, the same key and request within 24 hours answer the same job (however many arrive at once); the same key with another request is a 422.",
  tags: ['converter'],
  consumes: ['multipart/form-data', 'application/json', 'application/x-www-form-urlencoded'],
  headers: Type.Object({
    'idempotency-key': Type.Optional(
      Type.String({ maxLength: 255, description: 'draft-ietf-httpapi-idempotency-key-header: a unique key per request (a UUID), 24 hours.' }),
    ),
  }),
  body: Type.Object(
    {
      pdfDocument: Type.Optional(Type.String({ format: 'binary', description: 'The PDF (a merge: one part per document, in order).' })),
      ...fields,
      metadata: Type.Optional(METADATA),
    },
    {
      examples: [
        {
          operation: 'image',
          sourceUrl: 'https://files.example.com/scans/2026-11.pdf',
          dpi: 150,
          resultUrl: 'https://bucket.s3.eu-central-1.amazonaws.com/out/2026-11.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=86400&X-Amz-Signature=3f2a9c',
          metadata: { batch: '2026-11', invoice: 'INV-7' },
        },
      ],
    },
  ),
  response: {
    202: { description: 'Queued (or, for a repeated Idempotency-Key, the job it made). `Location` is the job.', ...accepted },
    ...errorResponses(SUBMIT_CODES),
  },
}

export const getJobSchema = {
  operationId: 'getConversionJob',
  summary: 'A conversion job: its status, progress, result or error',
  tags: ['converter'],
  params,
  response: {
    200: { ...jobView, description: 'The job as it stands: its status, its progress, then its result or its error.' },
    ...errorResponses(['JOB_NOT_FOUND'], { body: false }),
  },
}

export const jobResultSchema = {
  operationId: 'getConversionJobResult',
  summary: "A job's result, with the synchronous route's headers, from any node, while it is kept",
  tags: ['converter'],
  params,
  response: {
    200: {
      description: "The image, the zip of images, the multi-page TIFF, the PostScript or the text, streamed; the same bytes as the synchronous route's answer.",
      headers: {
        'X-Page-Count': { type: 'integer', description: 'Pages in the result.' },
        'Content-Disposition': {
          type: 'string',
          description: "attachment, with the synchronous route's file name (derived from the document's, never the same).",
        },
      },
      content: {
        ...imageContent,
        'application/postscript': { schema: Type.String({ format: 'binary' }) },
        'application/pdf': { schema: Type.String({ format: 'binary' }) },
        'application/json': {
          schema: Type.Array(Type.Object({}, { additionalProperties: true }), {
            description: 'A text job in JSON: the pages, as `extractText` answers them.',
            examples: [[{ page: 1, width: 595.28, height: 841.89, hasText: true, text: 'Quarterly report\n' }]],
          }),
        },
        'text/plain': { schema: Type.String() },
      },
    },
    ...errorResponses(['JOB_NOT_FOUND', 'JOB_RESULT_NOT_READY', 'JOB_RESULT_GONE'], { body: false }),
  },
}

export const cancelJobSchema = {
  operationId: 'cancelConversionJob',
  summary: 'Cancel a queued or running job (a running one stops at its next page), or delete a kept result',
  tags: ['converter'],
  params,
  response: {
    200: {
      ...jobView,
      description:
        'The job as it now stands: `cancelled` (a running one stops at its next page), or succeeded without its kept result (its download then answers 410).',
    },
    ...errorResponses(['JOB_NOT_FOUND', 'JOB_NOTHING_TO_DELETE'], { body: false }),
  },
}

export const listJobsSchema = {
  operationId: 'listConversionJobs',
  summary: "The account's conversion jobs, newest first",
  tags: ['converter'],
  querystring: Type.Object({
    status: Type.Optional(Type.String({ enum: [...JOB_STATUSES] })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    after: Type.Optional(Type.String({ description: 'The `next` of the page before.' })),
  }),
  response: {
    200: Type.Object(
      { jobs: Type.Array(jobView), next: Type.Union([Type.String(), Type.Null()], { description: 'The `after` of the next page; null on the last.' }) },
      {
        description: 'A page of jobs, newest first, and the cursor of the next.',
        examples: [{ jobs: (jobView as { examples?: unknown[] }).examples, next: null }],
      },
    ),
    ...errorResponses(['JOB_QUERY_INVALID'], { body: false }),
  },
}
