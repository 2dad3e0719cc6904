/**
 * A page's text from MuPDF's structured text, in the reading order MuPDF gives (the order
 * `mutool draw -F txt` writes): plain, as `asText` writes it, or structured (blocks, lines
 * and words, each with its box in points from the page's top left, words with their font and
 * size) for callers that lay text out again. No OCR: a page whose text is only pixels has none.
 *
 * A page's annotations and form fields are read with its contents, as they are drawn: a filled
 * field's value is text on the page to a reader, and to `mutool draw -F txt` and `pdftotext`
 * (MuPDF's own structured text of a page runs its contents only).
 *
 * The words come from walking the characters. The package's walk gives each character as
 * `String.fromCharCode(rune)`, which cuts a character beyond U+FFFF (mathematical letters,
 * emoji) to 16 bits, so each line's text is taken from MuPDF's own JSON of the page, which
 * writes every character whole, and the walked characters are renamed from it when the two
 * have as many characters.
 */
import type * as mupdf from 'mupdf'
import type { TextBlock, TextBox, TextWord } from './engine.ts'

type Box = TextBox

/** Options of MuPDF's structured text: its defaults, as mutool's text output uses (ligatures split, whitespace as MuPDF makes it). */
const STEXT_OPTIONS = ''

const round = (n: number) => Math.round(n * 100) / 100
const boxOf = ([x0, y0, x1, y1]: readonly number[]): Box => [round(x0!), round(y0!), round(x1!), round(y1!)]

/** hasAnnotations: whether a PDF page has annotations (form fields' widgets among them). */
function hasAnnotations(page: mupdf.Page): boolean {
  const annots = 'getObject' in page ? (page as mupdf.PDFPage).getObject().get('Annots') : null
  return annots?.isArray() === true && annots.length > 0
}

/**
 * stextOf: the page's structured text, of everything drawn on it: its contents, then its annotations and
 * form fields (through a display list of the whole page; a page without any is read directly, 10% sooner).
 */
function stextOf(page: mupdf.Page): mupdf.StructuredText {
  if (!hasAnnotations(page)) return page.toStructuredText(STEXT_OPTIONS)
  const list = page.toDisplayList(true)
  try {
    return list.toStructuredText(STEXT_OPTIONS)
  } finally {
    list.destroy()
  }
}

/** plainText: the page's text as MuPDF writes it (lines ended by newlines, blocks by an empty line). */
export function plainText(page: mupdf.Page): string {
  const stext = stextOf(page)
  try {
    return stext.asText()
  } finally {
    stext.destroy()
  }
}

/** lineTexts: every text line's text, in walking order, from MuPDF's JSON (whole characters). */
function lineTexts(stext: mupdf.StructuredText): string[] {
  const page = JSON.parse(stext.asJSON()) as { blocks?: { type?: string; lines?: { text?: string }[] }[] }
  const texts: string[] = []
  for (const block of page.blocks ?? []) if (block.type === 'text') for (const line of block.lines ?? []) texts.push(line.text ?? '')
  return texts
}

interface Char {
  c: string
  readonly quad: readonly number[]
  readonly font: string
  readonly size: number
}

/** wordsOf cuts a line's characters into words at white space; a word's box holds its characters' quads. */
function wordsOf(chars: readonly Char[]): TextWord[] {
  const words: TextWord[] = []
  let current: Char[] = []
  const flush = () => {
    if (current.length === 0) return
    const xs = current.flatMap((ch) => [ch.quad[0]!, ch.quad[2]!, ch.quad[4]!, ch.quad[6]!])
    const ys = current.flatMap((ch) => [ch.quad[1]!, ch.quad[3]!, ch.quad[5]!, ch.quad[7]!])
    const first = current[0]!
    words.push({
      text: current.map((ch) => ch.c).join(''),
      bbox: boxOf([Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)]),
      font: first.font,
      size: round(first.size),
    })
    current = []
  }
  for (const ch of chars) {
    if (/^\s$/u.test(ch.c)) flush()
    else current.push(ch)
  }
  flush()
  return words
}

/** structuredText: the page's text blocks, lines and words, with boxes, fonts and sizes. */
export function structuredText(page: mupdf.Page): TextBlock[] {
  const stext = stextOf(page)
  try {
    const texts = lineTexts(stext)
    const blocks: TextBlock[] = []
    let block: TextBlock | null = null
    let line: { bbox: Box; wmode: number; chars: Char[] } | null = null
    let lineIndex = 0
    stext.walk({
      beginTextBlock(bbox) {
        block = { bbox: boxOf(bbox), lines: [] }
        blocks.push(block)
      },
      beginLine(bbox, wmode) {
        line = { bbox: boxOf(bbox), wmode, chars: [] }
      },
      onChar(c, _origin, font, size, quad) {
        line?.chars.push({ c, quad, font: font.getName(), size })
      },
      endLine() {
        if (line === null || block === null) return
        const whole = [...(texts[lineIndex++] ?? '')]
        if (whole.length === line.chars.length) for (const [i, ch] of line.chars.entries()) ch.c = whole[i]!
        ;(block as TextBlock).lines.push({ bbox: line.bbox, wmode: line.wmode, text: line.chars.map((ch) => ch.c).join(''), words: wordsOf(line.chars) })
        line = null
      },
    })
    return blocks
  } finally {
    stext.destroy()
  }
}
