/**
 * MuPDF's heap, guarded. The `mupdf` package instantiates its WebAssembly module when it is
 * first imported, with the Emscripten options it finds in `globalThis.$libmupdf_wasm_Module`:
 * this module sets them, so it must be imported before `mupdf` (engines/mupdf.ts does). The
 * guard is set later, by the worker that knows its budget; until then every growth is allowed.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { instantiateGuarded, type HeapGuard } from './heap.ts'

export const mupdfHeap: { guard?: HeapGuard; memory?: WebAssembly.Memory } = {}

const wasm = readFileSync(fileURLToPath(new URL('mupdf-wasm.wasm', import.meta.resolve('mupdf'))))
;(globalThis as Record<string, unknown>).$libmupdf_wasm_Module = {
  instantiateWasm: instantiateGuarded(
    wasm,
    {
      allow: (bytes) => mupdfHeap.guard?.allow(bytes) ?? true,
      refused: () => mupdfHeap.guard?.refused(),
    },
    (memory) => {
      mupdfHeap.memory = memory
    },
  ),
}
