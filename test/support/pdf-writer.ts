/**
 * Small PDFs written object by object, for tests that need a document the corpus does not
 * have: written by hand (not by the engine under test), with a cross-reference table whose
 * offsets are the objects' own, so that every reader (MuPDF, poppler, qpdf) opens it unrepaired.
 */

/** A PDF object: its text (a dictionary, an array…), or a stream (its dictionary without /Length, and its data). */
export type PdfObject = string | { readonly dict: string; readonly stream: string }

/** writePdf writes objects 1…n in order, object 1 the catalogue, with an xref table and a trailer. */
export function writePdf(objects: readonly PdfObject[]): Buffer {
  const parts: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')]
  let at = parts[0]!.length
  const offsets: number[] = []
  for (const [i, object] of objects.entries()) {
    offsets.push(at)
    const body =
      typeof object === 'string'
        ? object
        : `${object.dict.replace(/>>\s*$/, '')} /Length ${Buffer.byteLength(object.stream, 'latin1')} >>\nstream\n${object.stream}\nendstream`
    const text = Buffer.from(`${i + 1} 0 obj\n${body}\nendobj\n`, 'latin1')
    parts.push(text)
    at += text.length
  }
  // Each xref entry is exactly 20 bytes: ten digits, five digits, n or f, and a two-byte end of line.
  const xref = [
    `xref\n0 ${objects.length + 1}\n`,
    '0000000000 65535 f\r\n',
    ...offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n\r\n`),
    `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${at}\n%%EOF\n`,
  ].join('')
  parts.push(Buffer.from(xref, 'latin1'))
  return Buffer.concat(parts)
}

/** A filled text field: its name, its value, and where its box is (x, y of the lower left corner, in points). */
export interface TextField {
  readonly name: string
  readonly value: string
  readonly x: number
  readonly y: number
  readonly width?: number
}

/** A page of a form: lines of printed text (each at its x, y) and its filled text fields. */
export interface FormPage {
  readonly lines: readonly { readonly text: string; readonly x: number; readonly y: number }[]
  readonly fields: readonly TextField[]
}

/** pdfString: text as a PDF literal string (printable ASCII, the delimiters escaped). */
const pdfString = (text: string) => `(${text.replace(/[\\()]/g, (c) => `\\${c}`)})`

const HEIGHT = 18

/**
 * filledForm writes a form of letter-size pages whose text fields are filled in, each with the
 * appearance stream a viewer writes when the field is filled (the value in Helvetica, as its
 * /DA says), so that a reader shows the values without making appearances of its own.
 */
export function filledForm(pages: readonly FormPage[]): Buffer {
  // 1 the catalogue, 2 the page tree, 3 the font, 4 the AcroForm; then each page, its contents, and each of its fields' widget and appearance.
  const font = '3 0 R'
  const numbered: PdfObject[] = []
  const pageRefs: string[] = []
  const fieldRefs: string[] = []
  for (const page of pages) {
    const pageNumber = 5 + numbered.length
    const widgets = page.fields.map((_, i) => `${pageNumber + 2 + 2 * i} 0 R`)
    const contents = page.lines.map((line) => `BT /F1 12 Tf ${line.x} ${line.y} Td ${pdfString(line.text)} Tj ET`).join('\n')
    numbered.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${font} >> >> /Contents ${pageNumber + 1} 0 R /Annots [${widgets.join(' ')}] >>`,
      { dict: '<< >>', stream: contents },
    )
    for (const [i, field] of page.fields.entries()) {
      const width = field.width ?? 240
      numbered.push(
        `<< /Type /Annot /Subtype /Widget /FT /Tx /F 4 /T ${pdfString(field.name)} /V ${pdfString(field.value)} /DA (/Helv 11 Tf 0 g) ` +
          `/Rect [${field.x} ${field.y} ${field.x + width} ${field.y + HEIGHT}] /P ${pageNumber} 0 R /AP << /N ${pageNumber + 3 + 2 * i} 0 R >> >>`,
        {
          dict: `<< /Type /XObject /Subtype /Form /BBox [0 0 ${width} ${HEIGHT}] /Resources << /Font << /Helv ${font} >> >> >>`,
          stream: `/Tx BMC\nq BT /Helv 11 Tf 0 g 2 5 Td ${pdfString(field.value)} Tj ET Q\nEMC`,
        },
      )
    }
    pageRefs.push(`${pageNumber} 0 R`)
    fieldRefs.push(...widgets)
  }
  return writePdf([
    '<< /Type /Catalog /Pages 2 0 R /AcroForm 4 0 R >>',
    `<< /Type /Pages /Kids [${pageRefs.join(' ')}] /Count ${pages.length} >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
    `<< /Fields [${fieldRefs.join(' ')}] /DA (/Helv 11 Tf 0 g) /DR << /Font << /Helv ${font} >> >> >>`,
    ...numbered,
  ])
}
