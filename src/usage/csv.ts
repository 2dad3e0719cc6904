/**
 * CSV for the usage reports (the portal's download and the admin API's `text/csv`): one
 * writer, so both doors guard alike. RFC 4180: a header row, CRLF line ends, every text field
 * quoted (its quotes doubled), numbers as they are, absent values empty.
 *
 * A spreadsheet runs a cell that starts with = + - @ (OWASP, "CSV Injection"), and it may
 * split a line on another delimiter than ours (Excel in a `;` locale splits on `;`, and a
 * quote inside a field does not protect what follows). So in a text field, wherever a cell
 * could start under any such split (the start, or after , ; tab CR LF, spaces allowed) and
 * a formula character follows, a `'` goes before it: `;=1+1` is written `";'=1+1"`.
 */

/** FORMULA_START: a place a cell may start (the field's start, or after a delimiter), followed by what makes a formula. */
const FORMULA_START = /(^|[,;\t\r\n])(?=[ \t\r]*[=+\-@])/g

/** csvField writes one field: a number as it is, text quoted and guarded. */
export function csvField(value: unknown): string {
  if (value === undefined || value === null) return ''
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  const text = String(value).replace(FORMULA_START, "$1'")
  return `"${text.replace(/"/g, '""')}"`
}

/** csv writes a header row and the rows, each line ending in CRLF. */
export function csv(header: readonly string[], rows: readonly (readonly unknown[])[]): string {
  return [header, ...rows].map((row) => `${row.map(csvField).join(',')}\r\n`).join('')
}
