/**
 * CSV as RFC 4180 has it: a header row, CRLF line ends, and a field quoted (its quotes
 * doubled) when it holds a comma, a quote, CR or LF. Absent values are empty fields.
 */

function field(value: unknown): string {
  const text = value === undefined || value === null ? '' : String(value)
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

export function csv(header: readonly string[], rows: readonly (readonly unknown[])[]): string {
  return [header, ...rows].map((row) => `${row.map(field).join(',')}\r\n`).join('')
}
