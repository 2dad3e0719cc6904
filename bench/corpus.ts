/**
 * The real PDFs the conversion benches read: the tests' own (test/fixtures/corpus/real), or the
 * folder BENCH_CORPUS names, laid out as that one is (the PDFs and their files.json), such as a
 * larger corpus kept outside the repository. The benches name a few of its files (the 117-page
 * GeoTopo-komprimiert.pdf, the encrypted libreoffice-writer-password.pdf, …): another folder holds
 * those too.
 */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { REAL_PDFS } from '../test/support/corpus.ts'

export const BENCH_CORPUS = resolve(process.env.BENCH_CORPUS || REAL_PDFS)
if (!existsSync(BENCH_CORPUS)) throw new Error(`BENCH_CORPUS: no folder at ${BENCH_CORPUS}`)
