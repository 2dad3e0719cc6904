/**
 * The error catalogue: every error a client can receive, each code once, with its HTTP
 * status, the body shape and the client message. `docs/errors.md` and the OpenAPI
 * document are generated from it (npm run docs) and a test fails when they drift.
 *
 * Three body shapes keep the Renda.io contract:
 * - `list`: `[{"type":"Error","code":...,"message":...}]`, for problems with a request
 *   (several may be reported at once);
 * - `message`: `{"message": ...}`, for gateway answers (403, 404, 429), one field only;
 * - `coded`: `{"message": ..., "code": ...}`, a `message` answer that also names its code
 *   (Renda.io clients read `message`; ours can tell a lockout or a busy account from a throttle).
 *   A status answers in one shape on a route (errorResponses refuses a mix).
 *
 * `{name}` in a message is filled in when the error is raised (limits, URLs, seconds).
 */
import { MAX_USER_ID_LENGTH, MAX_USER_ID_PATH_LENGTH } from '../domain/user-ids.ts'

export type Shape = 'list' | 'message' | 'coded'

interface Entry {
  readonly status: number
  readonly shape: Shape
  readonly message: string
  readonly doc: string
}

function entry(status: number, shape: Shape, message: string, doc: string): Entry {
  return { status, shape, message, doc }
}

export const catalogue = {
  // Gateway
  ACCESS_DENIED: entry(
    403,
    'message',
    "Please check the following: 1) An *active* subscription 2) API being invoked must be *Subscribed* for this region in the developer portal 3) A valid *API Key* must be passed in the 'x-api-key' request header parameter. Please refer to the documentation for more details - {docsUrl}",
    'The same body, byte for byte, for every refusal: no key, unknown or revoked key, suspended account, inactive subscription, group or region not subscribed.',
  ),
  ROUTE_NOT_FOUND: entry(
    404,
    'message',
    'Unsupported API request. Please refer to the documentation for more details - {docsUrl}',
    'No such route (or method) in this API.',
  ),
  GROUP_NOT_IN_REGION: entry(
    404,
    'message',
    'The {group} API is served in the eu region only, not in the {region} region.{where}',
    'The conversion group exists only in `eu`; its routes in `us` and `apac` answer this, with the `eu` URL to call when `EU_BASE_URL` is set.',
  ),
  THROTTLED: entry(
    429,
    'message',
    'Too Many Requests',
    "The account's throttle (calls per second, with a burst) is used up; sent with `Retry-After`. The call consumed nothing.",
  ),
  QUOTA_EXCEEDED: entry(
    429,
    'message',
    'Limit Exceeded',
    "The account's quota for the UTC day or month is used up; sent with `Retry-After` (seconds to the next window). The call consumed nothing.",
  ),
  OTP_LOCKED: entry(
    429,
    'coded',
    'Too many failed verifications for this secret. Try again in {seconds} seconds.',
    'Sent with `Retry-After` while a secret is locked after repeated failures; the code was not evaluated.',
  ),

  // Request
  BODY_TOO_LARGE: entry(413, 'list', 'The request body is larger than the limit of {limit} bytes.', 'The body exceeds `BODY_LIMIT_BYTES`.'),
  UNSUPPORTED_MEDIA_TYPE: entry(
    415,
    'list',
    'Unsupported Content-Type. The TOTP routes take application/x-www-form-urlencoded, application/json or multipart/form-data; the converter routes take multipart/form-data (a job with a sourceUrl, JSON or a form too).',
    'The body is not of a type the route takes.',
  ),
  MALFORMED_BODY: entry(
    400,
    'list',
    'The request body could not be parsed as {contentType}.',
    'The body does not parse as its declared content type (broken JSON, JSON that is not UTF-8, multipart without a boundary or cut short), or is not a set of fields.',
  ),
  PATH_INVALID: entry(
    400,
    'list',
    'The path is not valid: {reason}.',
    `A path segment (such as a user ID) does not decode (bad percent-escapes, or escapes of bytes that are not UTF-8), or is longer than ${MAX_USER_ID_PATH_LENGTH} characters as sent (a user ID of ${MAX_USER_ID_LENGTH} characters, decomposed and percent-escaped, is within it; one past the rule's ${MAX_USER_ID_LENGTH} is \`USER_ID_INVALID\`).`,
  ),
  INTERNAL_ERROR: entry(
    500,
    'list',
    'Internal error. It has been logged with request id {requestId}.',
    'A fault on our side. The log has the cause under the same request id.',
  ),
  SERVICE_UNAVAILABLE: entry(
    503,
    'list',
    'The service is not ready: {what} is unavailable. Retry shortly.',
    'A dependency (the store: SQLite, PostgreSQL or Redis) is unreachable; sent with `Retry-After`. verifyOTP answers this while Redis is away rather than check codes without replay protection.',
  ),

  // generateQRCode
  DATA_REQUIRED: entry(400, 'list', 'No Data provided to generate QR Code', '`data` is missing or empty.'),
  DATA_INVALID: entry(
    400,
    'list',
    'Data must be text: valid UTF-8, without unpaired UTF-16 surrogates.',
    '`data` is not text (invalid UTF-8 or percent-escapes of it, a lone surrogate in JSON, a repeated field).',
  ),
  DATA_TOO_LONG: entry(
    400,
    'list',
    'Data is too long for a QR code at error correction level {ecc}: the limit is {bytes} bytes of text ({alphanumeric} characters of A-Z 0-9 $%*+-./: and space, {numeric} digits).',
    'QR version 40 holds no more at the chosen `ecc`; a lower `ecc` holds more.',
  ),
  FORMAT_INVALID: entry(400, 'list', 'format must be png or svg.', '`format` is not `png` or `svg`.'),
  SIZE_INVALID: entry(400, 'list', 'size must be a whole number of pixels from 21 to {max}.', '`size` is out of range (`QR_MAX_SIZE_PX`).'),
  ECC_INVALID: entry(400, 'list', 'ecc must be one of L, M, Q, H.', '`ecc` is not an error correction level.'),
  MARGIN_INVALID: entry(400, 'list', 'margin must be a whole number of modules from 0 to 16.', '`margin` is out of range.'),
  COLOR_INVALID: entry(400, 'list', 'color must be a hex colour: #rrggbb or #rrggbbaa.', '`color` is not a hex colour.'),
  BGCOLOR_INVALID: entry(400, 'list', 'bgcolor must be a hex colour: #rrggbb or #rrggbbaa.', '`bgcolor` is not a hex colour.'),
  QR_BUSY: entry(
    503,
    'list',
    'Too many large QR codes are being drawn. Retry in {seconds} seconds.',
    'The queue of large QR codes (drawn in worker threads: `QR_WORKERS`, `QR_QUEUE_PER_WORKER`) is full; sent with `Retry-After`. Also from onboardUser, which draws one.',
  ),

  // onboardUser, getOTP, verifyOTP
  USER_ID_REQUIRED: entry(400, 'list', 'User ID is mandatory', '`userID` is missing or empty.'),
  USER_ID_INVALID: entry(
    400,
    'list',
    'User ID must be text (valid UTF-8) of at most 256 characters and must not contain \':\' or control characters; a managed-factor user ID must also not be "." or ".." nor contain format characters (bidi, zero-width).',
    '`userID` is too long, contains `:` (the label separator of otpauth URLs) or a control character, or is not text (invalid UTF-8, a lone surrogate). A managed-factor user (`/totp/users/{userID}`) is also refused when it is `.` or `..` (a URL path resolves them) or holds a format character (bidi overrides and isolates, zero-width characters) or a line separator; it is compared in Unicode NFC.',
  ),
  APPLICATION_ID_REQUIRED: entry(400, 'list', 'Application ID is mandatory', '`applicationID` is missing or empty.'),
  APPLICATION_ID_INVALID: entry(
    400,
    'list',
    "Application ID must be text (valid UTF-8) of at most 256 characters and must not contain ':' or control characters.",
    '`applicationID` is too long, contains `:` or a control character, or is not text.',
  ),
  TOKEN_VALIDITY_INVALID: entry(400, 'list', 'Token validity must be a whole number of seconds from 15 to 3600.', '`tokenValidity` is out of range.'),
  TOKEN_LENGTH_INVALID: entry(400, 'list', 'Token length must be a whole number of digits from 6 to 10.', '`tokenLength` is out of range.'),
  ALGORITHM_INVALID: entry(400, 'list', 'Algorithm must be one of SHA1, SHA256, SHA512.', '`algorithm` is not supported.'),
  PROFILE_INVALID: entry(
    400,
    'list',
    'Profile must be one of: {profiles}.',
    '`profile` is not a compatibility profile (the `profile` field of onboardUser lists them, with what each allows).',
  ),
  PROFILE_UNSUPPORTED: entry(
    400,
    'list',
    '{app} does not support {field} {value} (it reads {supported}).',
    "A parameter is outside the `profile`: the app it names would show wrong codes. One problem per such parameter; leave it out for the profile's default, or choose `any`.",
  ),
  SECRET_REQUIRED: entry(400, 'list', 'Secret is mandatory', '`secret` is missing or empty.'),
  SECRET_INVALID: entry(
    400,
    'list',
    'Secret must be base32 (RFC 4648: A-Z and 2-7) of at least {bits} bits ({chars} characters) and at most 1024 characters; spaces and padding are ignored.',
    '`secret` is not base32, or is shorter than `MIN_SECRET_BITS` (default 80 bits, 16 characters).',
  ),
  TOKEN_REQUIRED: entry(400, 'list', 'Token is mandatory', '`token` is missing or empty.'),
  TOKEN_INVALID: entry(400, 'list', 'Token must be 6 to 10 digits.', '`token` has characters other than digits or a wrong length.'),
  ATTEMPTS_LIMITED: entry(
    429,
    'coded',
    'Too many attempts for this user or rate limit key. Try again in {seconds} seconds.',
    "Sent with `Retry-After`: the user's attempts (verify, activate, resync, recover, passkey sign-in) in the window, or the caller-supplied `rateLimitKey`'s, reached the account's limit (`FACTOR_USER_LIMIT`, `FACTOR_KEY_LIMIT` per `FACTOR_LIMIT_WINDOW_SECONDS`, or the account's factor settings). Nothing was tried, and nothing counts against the user's lockout.",
  ),
  OTP_INVALID: entry(
    400,
    'list',
    'OTP is invalid or has expired.',
    "The token matches none of the current step and the steps either side of it, or has another number of digits than the secret's.",
  ),
  OTP_REUSED: entry(
    400,
    'list',
    'OTP has already been used. Wait for the next code.',
    'The token is for a time step at or before the last one accepted for this secret (RFC 6238 §5.2).',
  ),

  // Managed factors (/totp/users/…)
  USER_NOT_FOUND: entry(
    404,
    'list',
    'No such user.',
    "The user has no factor or recovery codes in the calling account (another account's users are never seen: the same answer).",
  ),
  FACTOR_NOT_FOUND: entry(404, 'list', 'No such factor.', 'The user has no such factor (a pending one not activated within `FACTOR_PENDING_SECONDS` is gone).'),
  FACTOR_LIMIT: entry(
    409,
    'list',
    'The user has {limit} factors, the most allowed; delete one first.',
    'The user has `FACTOR_MAX_PER_USER` factors (pending ones count until they expire).',
  ),
  FACTORS_PER_ACCOUNT: entry(
    409,
    'list',
    'The account keeps {limit} managed factors, the most it may; delete some first.',
    "A factor created, imported (or a line of a bulk import, in its report's `refused`) or a passkey registered while the account keeps `FACTORS_PER_ACCOUNT` factors across its users (pending ones count until they expire). Decided in the same step as the write: parallel creations never pass it. Nothing was kept; other accounts are not affected.",
  ),
  FACTOR_ACTIVE: entry(409, 'list', 'The factor is active already.', 'Activation of a factor that is active.'),
  FACTOR_PENDING: entry(409, 'list', 'The factor is not active yet: activate it with its first code.', 'Resync of a factor not yet activated.'),
  NO_ACTIVE_FACTOR: entry(
    409,
    'list',
    'The user has no active TOTP factor.',
    'Verification of a code for a user whose TOTP factors are all pending, or who has passkeys only.',
  ),
  FACTOR_EXISTS: entry(
    409,
    'list',
    'This secret is imported for the user already (factor {factorID}).',
    'An import of a secret the user has as a factor already (an import is known by account, user and secret, so a CSV imported again skips what went in).',
  ),
  IMPORT_SOURCE_REQUIRED: entry(
    400,
    'list',
    'Give the secret to import: secret (base32) or otpURL (an otpauth://totp/ URI), one of them.',
    'Neither `secret` nor `otpURL`, or both.',
  ),
  IMPORT_STATUS_INVALID: entry(400, 'list', 'status must be active or pending.', '`status` of an import is another value.'),
  OTP_URL_INVALID: entry(
    400,
    'list',
    'otpURL must be an otpauth://totp/ Key URI with a base32 secret: {reason}.',
    "`otpURL` is not an otpauth://totp/ URI, has no secret or one that is not base32 of `MIN_SECRET_BITS`, or parameters outside the service's (SHA1/SHA256/SHA512, 6 to 10 digits, 15 to 3600 s), or ones that disagree with those given beside it.",
  ),
  FACTOR_NOT_TOTP: entry(
    409,
    'list',
    'Factor {factorID} is a passkey: it has no codes to activate or resync with.',
    'Activation or resync of a passkey (a passkey is active from its registration).',
  ),
  FACTOR_UNREADABLE: entry(
    500,
    'list',
    "The factor's secret cannot be opened, so no code was checked against it: its encryption key version is not configured, or the stored value was altered or moved. It has been logged with request id {requestId}.",
    'A sealed secret does not open (a key version removed from `ENCRYPTION_KEYS` too early, or a value moved between rows or altered in the store). The code was not checked; the log names the factor.',
  ),
  LABEL_INVALID: entry(
    400,
    'list',
    'label must be text (valid UTF-8) of at most 64 characters, without control characters.',
    '`label` is too long, has a control character, or is not text.',
  ),
  NEXT_TOKEN_REQUIRED: entry(400, 'list', 'nextToken is mandatory: the code the device shows after token.', '`nextToken` is missing or empty.'),
  NEXT_TOKEN_INVALID: entry(400, 'list', 'nextToken must be 6 to 10 digits.', '`nextToken` has characters other than digits or a wrong length.'),
  RESYNC_FAILED: entry(
    400,
    'list',
    'The two codes are not consecutive codes of this factor within {minutes} minutes of now.',
    'Resync found no two consecutive codes within `FACTOR_RESYNC_STEPS` steps either side; counts as a failed attempt.',
  ),
  RECOVERY_CODE_REQUIRED: entry(400, 'list', 'code is mandatory.', '`code` is missing or empty.'),
  RECOVERY_CODE_INVALID: entry(
    400,
    'list',
    'Recovery code is invalid or has been used.',
    'No unused recovery code of the user matches; counts as a failed attempt.',
  ),

  // Passkeys (/totp/users/{userID}/passkeys/…)
  PASSKEYS_NOT_CONFIGURED: entry(
    409,
    'list',
    "Passkeys need the account's relying party: set its ID and allowed origins (developer portal, admin API or CLI) first.",
    'A passkey ceremony for an account whose factor settings have no relying party ID or no origin.',
  ),
  NO_PASSKEY: entry(409, 'list', 'The user has no passkey.', 'Authentication options for a user who has factors, none of them a passkey.'),
  RATE_LIMIT_KEY_INVALID: entry(
    400,
    'list',
    'rateLimitKey must be text (valid UTF-8) of 1 to 256 characters, without control characters.',
    '`rateLimitKey` is empty, too long, or has a control character.',
  ),
  USER_NAME_INVALID: entry(
    400,
    'list',
    'userName and displayName must be text (valid UTF-8) of 1 to 64 characters, without control characters.',
    '`userName` or `displayName` is empty, too long, or has a control character.',
  ),
  USER_VERIFICATION_INVALID: entry(400, 'list', 'userVerification must be required, preferred or discouraged.', '`userVerification` is another value.'),
  RESIDENT_KEY_INVALID: entry(400, 'list', 'residentKey must be required, preferred or discouraged.', '`residentKey` is another value.'),
  ATTACHMENT_INVALID: entry(400, 'list', 'authenticatorAttachment must be platform or cross-platform.', '`authenticatorAttachment` is another value.'),
  CREDENTIAL_REQUIRED: entry(400, 'list', "credential is mandatory: the browser's answer (PublicKeyCredential.toJSON()).", '`credential` is missing.'),
  CREDENTIAL_INVALID: entry(
    400,
    'list',
    "credential must be the browser's answer as JSON (PublicKeyCredential.toJSON()): id, rawId, type and response.",
    '`credential` is not an object of the shape WebAuthn answers in, or a field of it is too long.',
  ),
  PASSKEY_CHALLENGE_INVALID: entry(
    400,
    'list',
    'The answer is to no challenge this user has open (unknown, answered already, or expired): ask for new options.',
    "The answer's challenge was not issued for this user and ceremony, was used once already, or is older than `PASSKEY_CHALLENGE_SECONDS`; counts as a failed attempt when signing in.",
  ),
  PASSKEY_INVALID: entry(
    400,
    'list',
    "The passkey's answer does not verify.",
    'A bad signature, an origin or relying party ID the account does not allow, user verification missing when it was required, or a credential the user does not have; counts as a failed attempt when signing in (the log says which).',
  ),
  PASSKEY_REPLAYED: entry(
    400,
    'list',
    "The passkey's signature counter went back: a replayed answer or a cloned authenticator. Refused.",
    "The authenticator's counter is not above the one last seen (an authenticator that keeps none sends 0 each time, and is taken); counts as a failed attempt.",
  ),
  PASSKEY_UNKNOWN: entry(
    404,
    'list',
    'No passkey of this account has this credential (deleted, or made for another site): sign in another way.',
    "A sign-in without a user ID whose answer names a credential the calling account does not have (another account's passkeys are never seen: the same answer). The challenge is used up; no user's attempt is counted, as none is known. The browser may be told to forget it (`PublicKeyCredential.signalUnknownCredential`).",
  ),
  PASSKEY_REGISTERED: entry(409, 'list', 'This authenticator holds a passkey of the user already.', 'A registration whose credential ID the user has already.'),
  PASSKEY_CHALLENGES_PER_ACCOUNT: entry(
    429,
    'coded',
    'This account has {limit} passkey ceremonies open, the most it may have at once. Retry in {seconds} seconds.',
    'Registration or sign-in options while the account has `PASSKEY_CHALLENGES_PER_ACCOUNT` challenges open (issued, not answered, not expired); sent with `Retry-After` (seconds until its first open one expires). Nothing was kept; other accounts are not affected.',
  ),

  // Converter (generateImage, generatePostscript)
  PDF_REQUIRED: entry(
    400,
    'list',
    "No PDF provided: send the file in the multipart field 'pdfDocument'.{detail}",
    'No file in `pdfDocument` (a file in another field is named in the message).',
  ),
  NOT_A_PDF: entry(400, 'list', "The file in 'pdfDocument' is not a PDF (it has no %PDF- header).", 'The upload does not start like a PDF.'),
  FILE_TOO_LARGE: entry(413, 'list', "The file in 'pdfDocument' is larger than the limit of {limit} bytes.", 'The upload exceeds `MAX_UPLOAD_BYTES`.'),
  TOO_MANY_PARTS: entry(413, 'list', 'The form has too many fields or files.', 'More multipart parts than a conversion takes.'),
  DPI_INVALID: entry(400, 'list', 'dpi must be a whole number from 36 to 600.', '`dpi` is out of range.'),
  IMAGE_FORMAT_INVALID: entry(
    400,
    'list',
    'format must be one of {formats}.',
    '`format` is not an image format of the route (`jpg` and `tif` are taken for `jpeg` and `tiff`).',
  ),
  BOX_SIZE_INVALID: entry(
    400,
    'list',
    '{field} must be a whole number of pixels from 1 to {max}.',
    '`width` or `height` (a thumbnail box) is not a whole number from 1 to 10000.',
  ),
  SIZE_CONFLICT: entry(
    400,
    'list',
    'Give a dpi, or a width and/or height to fit the page within, not both.',
    '`dpi` was sent together with `width` or `height`: a page is drawn at a dpi or fitted within a box.',
  ),
  QUALITY_INVALID: entry(400, 'list', 'quality must be a whole number from 1 to 100.', '`quality` (JPEG or WebP) is out of range.'),
  COMPRESSION_INVALID: entry(400, 'list', 'compression must be one of {compressions}.', "`compression` is not one of TIFF's compressions."),
  BIT_DEPTH_INVALID: entry(400, 'list', 'bitDepth must be 1 or 8.', '`bitDepth` (TIFF) is not 1 (black and white) or 8 (gray levels or colours).'),
  COMPRESSION_BIT_DEPTH_CONFLICT: entry(
    400,
    'list',
    'compression {compression} needs bitDepth {bitDepth}.',
    'The TIFF `compression` does not suit the `bitDepth`: `ccittfax4` (fax Group 4) is for 1-bit pages, `jpeg` for 8-bit ones.',
  ),
  OPTION_NOT_APPLICABLE: entry(
    400,
    'list',
    '{field} applies to {formats} only, not to {format}.',
    'An option was sent that the chosen `format` does not take (`quality` is for JPEG and WebP, `compression` and `bitDepth` for TIFF): it is refused rather than ignored.',
  ),
  TEXT_FORMAT_INVALID: entry(400, 'list', 'format must be one of {formats}.', '`format` of `extractText` is not `json`, `text` or `structured`.'),
  PRESET_INVALID: entry(400, 'list', 'preset must be one of {presets}.', "`preset` of `compress` is not one of Ghostscript's pdfwrite presets."),
  OPTION_NOT_TAKEN: entry(
    400,
    'list',
    '{field} is not an option of {route}.',
    "An option was sent that the route, or the job's `operation`, does not take: another route's, such as `dpi` on `extractText`, `angle` on `flatten` or `colorMode` on a page operation, or `pages` on `compress` and `flatten`, which take the whole document. Refused rather than ignored, in a form and in a JSON job alike; the body fields of each operation in the API reference are what it takes.",
  ),
  MERGE_DOCUMENT_REFUSED: entry(
    422,
    'list',
    'Document {part} of the merge {reason}.',
    'A document of a merge cannot be used: unreadable, encrypted without its password, or with fewer pages than its `pages` ask for.',
  ),
  ANGLE_INVALID: entry(
    400,
    'list',
    'angle must be 90, 180 or 270 (clockwise; -90, -180 or -270 turn the other way).',
    '`angle` of `rotate` is missing or not a quarter turn.',
  ),
  MERGE_DOCUMENTS_REQUIRED: entry(
    400,
    'list',
    "A merge takes 2 to {max} documents, each in a 'pdfDocument' part, in order; {count} came.",
    'Fewer than two `pdfDocument` parts, or more than 20.',
  ),
  MERGE_FIELDS_MISMATCH: entry(
    400,
    'list',
    "{field} came {count} times for {documents} documents: send it once per document, in the documents' order (empty for all pages, or no password).",
    "More `pages` or `password` fields than a merge's documents.",
  ),
  SPLIT_PARTS_REQUIRED: entry(
    400,
    'list',
    'Give ranges (a page selection a file, one ranges field each, such as 1-3 then 4-6) or every (such as 2, pages a file), one of them.',
    '`split` got neither `ranges` nor `every`, or both.',
  ),
  SPLIT_EVERY_INVALID: entry(400, 'list', 'every must be a whole number of pages, 1 or more.', '`every` of `split` is not a positive whole number.'),
  SPLIT_RANGES_INVALID: entry(
    400,
    'list',
    "ranges must be page selections, one a field (or separated by semicolons), such as '1-3' and '4-6' (at most {max}).",
    '`ranges` of `split` (its fields together) does not parse, has an empty part, or has more than 200 parts.',
  ),
  PAGES_INVALID: entry(400, 'list', "pages must be a page selection such as '1-3,5,9-'.", '`pages` does not parse.'),
  COLOR_MODE_INVALID: entry(400, 'list', 'colorMode must be rgb or gray.', '`colorMode` is not `rgb` or `gray`.'),
  PASSWORD_INVALID: entry(
    400,
    'list',
    'password must be at most 256 characters of well-formed text.',
    '`password` is too long, or holds a lone UTF-16 surrogate (`\\ud800` in JSON).',
  ),
  PAGES_OUT_OF_RANGE: entry(400, 'list', 'The page selection is outside the document, which has {count} pages.', '`pages` names a page past the last one.'),
  PDF_UNREADABLE: entry(
    422,
    'list',
    'The PDF cannot be read: it is damaged beyond repair or not a PDF document.',
    'The engines cannot open or repair the document.',
  ),
  PAGE_UNREADABLE: entry(
    422,
    'list',
    'Page {page} of the PDF cannot be read: the document is damaged there.',
    'A page asked for cannot be loaded (its page tree entry or the page itself is damaged): found before the answer begins, so that it is never a 200 cut short.',
  ),
  PDF_PASSWORD_REQUIRED: entry(
    422,
    'list',
    "The PDF is encrypted: send its password in the field 'password' (the one given was wrong, or none was given).",
    'The document needs a password, and none or a wrong one was given.',
  ),
  TOO_MANY_PAGES: entry(422, 'list', 'The PDF has {count} pages; the limit is {limit}.', 'More pages than `MAX_PAGES`.'),
  PAGE_TOO_LARGE: entry(
    422,
    'list',
    'Page {page} at {dpi} dpi would be {megapixels} megapixels; the limit is {limit}. Use a dpi of {fit} or less.',
    'A page would exceed `MAX_PAGE_MEGAPIXELS` at the requested `dpi`.',
  ),
  PAGE_TOO_LARGE_AT_ANY_DPI: entry(
    422,
    'list',
    'Page {page} at {dpi} dpi would be {megapixels} megapixels; the limit is {limit}. The page is too large at any allowed dpi (even at {minDpi}).',
    'A page would exceed `MAX_PAGE_MEGAPIXELS` even at the lowest `dpi` (36).',
  ),
  BOX_TOO_LARGE: entry(
    422,
    'list',
    'Page {page} fitted within {box} would be {size} pixels, {megapixels} megapixels; the limit is {limit}. Give a smaller width or height.',
    'A page fitted within the requested `width` and `height` would exceed `MAX_PAGE_MEGAPIXELS` (a very tall or wide page fitted to one side).',
  ),
  OUTPUT_TOO_LARGE: entry(
    422,
    'list',
    'The result would be larger than the limit of {limit} bytes.',
    "The answer (the PNG, the zip's pages or the PostScript) would exceed `MAX_OUTPUT_BYTES`; refused before anything is sent where the engine can tell (a zip already streaming is cut short).",
  ),
  CONVERSION_MEMORY_EXCEEDED: entry(
    422,
    'list',
    'The conversion needs more memory than the limit of {limit} MiB and was stopped.',
    "An engine was refused memory past `WORKER_MAX_MEMORY_MB` (both engines' WebAssembly memory, the JS heap and scratch files together): the conversion was stopped at the cap and its worker replaced.",
  ),
  CONVERSION_TIMEOUT: entry(
    422,
    'list',
    'The conversion took longer than the limit of {seconds} seconds and was stopped.',
    'A conversion exceeded `CONVERSION_TIMEOUT_MS`; its worker was replaced.',
  ),
  CONVERSION_PAGE_TIMEOUT: entry(
    422,
    'list',
    'A page of the PDF took longer than the limit of {seconds} seconds to convert, and the conversion was stopped.',
    'One page (or the opening of the document) kept an engine busy past `CONVERSION_PAGE_TIMEOUT_MS`, as forms or patterns that draw each other exponentially often do; the conversion was stopped and its worker replaced.',
  ),
  CONVERSION_FAILED: entry(
    422,
    'list',
    'The PDF could not be converted: the engine failed on it.',
    'An engine failed or its worker died on this document; the worker was replaced.',
  ),
  QUEUE_FULL: entry(503, 'list', 'Too many conversions are waiting. Retry in {seconds} seconds.', 'The conversion queue is full; sent with `Retry-After`.'),
  CONVERSIONS_PER_ACCOUNT: entry(
    429,
    'coded',
    'This account has {limit} conversions under way, the most it may have at once. Retry in {seconds} seconds.',
    'The account already has `CONVERTER_MAX_PER_ACCOUNT` conversions running, waiting or being uploaded; sent with `Retry-After` before the body is read. Other accounts are not affected.',
  ),

  // Conversion jobs
  JOB_SOURCE_REQUIRED: entry(
    400,
    'list',
    "A job needs its document: the file in the multipart field 'pdfDocument', or its address in 'sourceUrl' (not both).",
    'Neither or both of `pdfDocument` and `sourceUrl`.',
  ),
  OPERATION_INVALID: entry(400, 'list', 'operation must be one of {operations}.', '`operation` is missing or not an operation of the conversion group.'),
  SOURCE_URL_INVALID: entry(
    400,
    'list',
    'sourceUrl {reason}.',
    '`sourceUrl` is not an `https` URL of a public host (a local name such as `localhost.` or `*.internal`, and a name that resolves to an address that is not public, included: the answer does not say which address), or is over 8192 characters.',
  ),
  RESULT_URL_INVALID: entry(
    400,
    'list',
    'resultUrl {reason}.',
    '`resultUrl` is not an `https` URL of a public host, or is over 8192 characters. It receives the result by `PUT` (a presigned S3, GCS or Azure Blob URL).',
  ),
  METADATA_INVALID: entry(
    400,
    'list',
    'metadata must be a JSON object of at most {limit} bytes.',
    '`metadata` is not a JSON object, or is larger than 4 KiB as JSON.',
  ),
  IDEMPOTENCY_KEY_INVALID: entry(
    400,
    'list',
    'The Idempotency-Key header must be 1 to 255 printable ASCII characters.',
    'The `Idempotency-Key` header is empty, too long, or has characters outside printable ASCII (a quoted string per draft-ietf-httpapi-idempotency-key-header is taken with its quotes removed).',
  ),
  IDEMPOTENCY_KEY_REUSED: entry(
    422,
    'list',
    'This Idempotency-Key was used in the last 24 hours with another request{what}.',
    'The key came with another path, body, document, options or URLs within 24 hours; the same request answers as it did the first time.',
  ),
  IDEMPOTENCY_KEY_BUSY: entry(
    409,
    'list',
    'A request with this Idempotency-Key is still under way: try again in a few seconds for its answer.',
    'The first request with the key had not answered within `IDEMPOTENCY_WAIT_MS` (or its node stopped; its hold ends within a minute).',
  ),
  IDEMPOTENCY_KEYS_PER_ACCOUNT: entry(
    429,
    'coded',
    'This account keeps as many Idempotency-Key answers as it may. Retry in {seconds} seconds, or send the request without the header.',
    'A request with a new `Idempotency-Key` while its account (or admin token) keeps `IDEMPOTENCY_KEYS_PER_ACCOUNT` records or `IDEMPOTENCY_BYTES_PER_ACCOUNT` bytes of them (each is kept 24 hours); sent with `Retry-After` (seconds until its first one expires). Nothing was done; a key already used still answers, and other accounts are not affected.',
  ),
  IDEMPOTENCY_ANSWER_UNREADABLE: entry(
    409,
    'list',
    'The answer kept for this Idempotency-Key can no longer be read (the encryption key it was sealed under was removed); the request was not made again. Send it with a new key to make it again.',
    'A replay whose kept answer does not open: its key version was removed from `ENCRYPTION_KEYS` before `encryption rotate` re-sealed it (or the record was altered). Logged with the reason; nothing is made twice.',
  ),
  JOBS_PER_ACCOUNT: entry(
    429,
    'coded',
    'This account has {limit} conversion jobs queued and running, the most it may have. Retry once some have ended.',
    'The account has `JOB_MAX_ACTIVE_PER_ACCOUNT` jobs queued and running; sent with `Retry-After`.',
  ),
  JOB_QUERY_INVALID: entry(
    400,
    'list',
    'Invalid {field}: {reason}.',
    'A query parameter of the job list is out of range: `status` not a job status, `limit` not 1 to 100, `after` not a cursor this API gave.',
  ),
  JOB_UPLOADS_BUSY: entry(
    503,
    'list',
    'Too many job documents are being uploaded. Retry in {seconds} seconds.',
    'The node reads `JOB_UPLOADS_AT_ONCE` job documents already; sent with `Retry-After` before the body is read (a `sourceUrl` submission is never refused so).',
  ),
  JOB_UPLOADS_PER_ACCOUNT: entry(
    429,
    'coded',
    'This account is uploading {limit} job documents at once, the most it may. Retry in {seconds} seconds.',
    'The account uploads `JOB_UPLOADS_PER_ACCOUNT` job documents to the node already; sent with `Retry-After` before the body is read.',
  ),
  JOB_NOT_FOUND: entry(
    404,
    'list',
    'No such conversion job.',
    "The job does not exist, is another account's, or its record has been pruned (`JOB_RETENTION_DAYS`).",
  ),
  JOB_RESULT_NOT_READY: entry(
    409,
    'list',
    'The job has no result: it is {status}.',
    'The result of a job that is queued, running, failed or cancelled; its status tells when to ask again.',
  ),
  JOB_RESULT_GONE: entry(
    410,
    'list',
    'The result of this job is gone: it was kept until {expiredAt}, unless deleted before.',
    'The result has passed `JOB_RESULT_TTL_SECONDS`, or was deleted; the job record stays.',
  ),
  JOB_NOTHING_TO_DELETE: entry(
    409,
    'list',
    'The job is {status} and keeps no result: nothing to cancel or delete.',
    'DELETE of a job that has ended without a result kept (failed, cancelled, or its result already gone).',
  ),
  SOURCE_FETCH_FAILED: entry(
    422,
    'list',
    'The document could not be fetched from sourceUrl: {reason}.',
    "A job's `sourceUrl` answered an error, timed out (`JOB_TRANSFER_TIMEOUT_MS`), was refused by the address rules at fetch time, or did not give a PDF.",
  ),
  RESULT_UPLOAD_FAILED: entry(
    422,
    'list',
    'The result could not be uploaded to resultUrl: {reason}. It stays available for download until it expires.',
    "A job's `resultUrl` refused the `PUT` (after three tries) or could not be reached; the result is kept as for any job.",
  ),
  JOB_STORAGE_FULL: entry(
    422,
    'list',
    "The account's kept documents and results would pass the limit of {limit} bytes: delete results, or wait for jobs to end or their results to expire.",
    "The job's document, or its result, would make the bytes the account keeps (documents of its queued and running jobs, results) pass `JOB_STORAGE_PER_ACCOUNT_MB`: a submission is refused, a running job fails.",
  ),

  // Admin API (its own listener, ADMIN_LISTEN): every answer in the list shape
  ADMIN_TOKEN_REQUIRED: entry(
    401,
    'list',
    'An admin token is required: send it in the header Authorization: Bearer followed by the token.',
    'No `Authorization: Bearer` header; sent with `WWW-Authenticate: Bearer realm="tessera-admin"`. Tokens come from `npm run admin -- admin token create`.',
  ),
  ADMIN_TOKEN_INVALID: entry(
    401,
    'list',
    'The admin token is unknown or revoked.',
    'The bearer token is not a live admin token; sent with `WWW-Authenticate: Bearer realm="tessera-admin", error="invalid_token"`.',
  ),
  ADMIN_READ_ONLY: entry(
    403,
    'list',
    'This admin token may only read: changes need a token of scope write.',
    'A token of scope `read` asked for a change (POST, PUT, PATCH, DELETE); sent with `WWW-Authenticate: Bearer realm="tessera-admin", error="insufficient_scope"`.',
  ),
  NOT_FOUND: entry(404, 'list', 'Not found: {reason}.', 'The account or key the path names does not exist.'),
  ADMIN_ROUTE_NOT_FOUND: entry(
    404,
    'list',
    'No such route (or method) in the admin API; its routes are listed at /admin/v1/openapi.json.',
    'No such route or method in the admin API (audit events, for one, have no route that changes or deletes them).',
  ),
  FIELD_INVALID: entry(
    400,
    'list',
    'Invalid {field}: {reason}.',
    'A field of the path, query or JSON body is missing, of the wrong type, out of range or unknown; one problem per bad field, all at once.',
  ),
  CONFLICT: entry(
    409,
    'list',
    'Conflict: {reason}.',
    'The change does not apply to the resource as it stands: a key revoked, expired or rolled already; approving a subscription that is not pending.',
  ),
  LIMIT_REACHED: entry(
    409,
    'list',
    'Limit reached: {reason}.',
    'The account has the most active keys (`KEY_MAX_PER_ACCOUNT`) or webhook endpoints (`WEBHOOK_MAX_ENDPOINTS`) it may have: revoke or delete one first. Or the admin token keeps the most Idempotency-Key records it may (`IDEMPOTENCY_KEYS_PER_ACCOUNT`, `IDEMPOTENCY_BYTES_PER_ACCOUNT`), sent with `Retry-After`. Decided atomically: parallel creations never pass the cap.',
  ),
  BAD_CURSOR: entry(
    400,
    'list',
    'The cursor in after is not one this API gave out: start again without it.',
    '`after` is not a `next` cursor of an earlier page of the same list.',
  ),
  JSON_REQUIRED: entry(415, 'list', 'The admin API takes application/json bodies.', 'A body of another Content-Type.'),
  CSV_REQUIRED: entry(415, 'list', 'The import takes a CSV body (Content-Type: text/csv).', 'A factor import whose body is not `text/csv`.'),
  CSV_LINE_INVALID: entry(
    400,
    'list',
    'The line is not a CSV record of userID, secret and an optional label: {reason}.',
    "A line of a bulk factor import (its report's `refused`, in an answer of 200, never an HTTP answer) that is not UTF-8, holds a NUL byte, a byte order mark past the file's start or a CR that does not end it, is not RFC 4180 CSV (an unclosed quote, a quote inside an unquoted field, text after a closing quote), or has other than 2 or 3 fields. The other lines are imported.",
  ),
  CSV_LINE_TOO_LONG: entry(
    400,
    'list',
    'The line is longer than {limit} bytes: it was not read.',
    "A line of a bulk factor import (its report's `refused`, in an answer of 200, never an HTTP answer) past the bound on a line (8 KiB, its line break not counted). The other lines are imported.",
  ),
} as const satisfies Record<string, Entry>

export type ErrorCode = keyof typeof catalogue

export const ERROR_CODES = Object.keys(catalogue) as ErrorCode[]

/** render fills the `{name}` placeholders of a catalogue message. */
export function render(code: ErrorCode, params: Record<string, string | number> = {}): string {
  return catalogue[code].message.replace(/\{(\w+)\}/g, (whole, name: string) => (name in params ? String(params[name]) : whole))
}
