/**
 * The PDF corpus of the tests, in the repository (test/fixtures/corpus: its README names the two
 * collections and their licences). Every test and bench finds it here; none reads outside the
 * repository.
 */
import { fileURLToPath } from 'node:url'

/** CORPUS: the corpus folder, with a slash at its end. */
export const CORPUS = fileURLToPath(new URL('../fixtures/corpus/', import.meta.url))
/** REAL_PDFS: well-formed documents of many producers (py-pdf/sample-files, CC-BY-SA-4.0), with their files.json. */
export const REAL_PDFS = fileURLToPath(new URL('../fixtures/corpus/real/', import.meta.url))
/** DAMAGED_PDFS: broken, looping and hostile documents (qpdf's test suite, Apache-2.0). */
export const DAMAGED_PDFS = fileURLToPath(new URL('../fixtures/corpus/damaged/', import.meta.url))

/**
 * CORPUS_TESTS: the tests that read the corpus the most (the corpus tier, the page operations on the whole corpus).
 * test/checks/clean-copy.test.ts runs them in a copy of the repository; `npm test` runs them there only, not twice.
 */
export const CORPUS_TESTS: readonly string[] = ['test/corpus/**/*.test.ts', 'src/converter/engines/edit.test.ts']
