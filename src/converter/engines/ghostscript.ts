/**
 * The PostScript engine: Ghostscript's `ps2write` device from a WebAssembly build
 * (`@bentopdf/gs-wasm`, chosen over `@okathira/ghostpdl-wasm`, which traps with "memory
 * access out of bounds" on a 117-page file of the corpus). ps2write keeps text and vector
 * art as vectors and writes DSC-conformant Level 2 PostScript. The module is loaded once
 * per worker and called once per job on its in-memory file system; -dSAFER all the same.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

interface GhostscriptModule {
  callMain(args: string[]): number
  FS: {
    writeFile(path: string, data: Uint8Array): void
    readFile(path: string): Uint8Array
    unlink(path: string): void
  }
}

type Factory = (options: object) => Promise<GhostscriptModule>

/** The package exports a browser loader; Node takes the Emscripten module beside it, with the wasm read from disk. */
const ASSETS = new URL('../assets/', import.meta.resolve('@bentopdf/gs-wasm'))
import type { PdfEngine, PostScriptOptions } from './engine.ts'

export class GhostscriptError extends Error {
  override name = 'GhostscriptError'
}

/** pageList writes 1-based pages as Ghostscript's -sPageList (ranges collapsed). */
export function pageList(pages: readonly number[]): string {
  const parts: string[] = []
  for (let i = 0; i < pages.length; i++) {
    const start = pages[i]!
    while (i + 1 < pages.length && pages[i + 1] === pages[i]! + 1) i++
    parts.push(start === pages[i] ? String(start) : `${start}-${pages[i]}`)
  }
  return parts.join(',')
}

export interface LoadedGhostscript {
  readonly module: GhostscriptModule
  /** The WebAssembly memory, which the build does not export. */
  memory(): WebAssembly.Memory | undefined
}

/** loadGhostscript instantiates one Ghostscript; `printErr` receives its error output. */
export async function loadGhostscript(printErr: (line: string) => void): Promise<LoadedGhostscript> {
  let memory: WebAssembly.Memory | undefined
  const wasm = readFileSync(fileURLToPath(new URL('gs.wasm', ASSETS)))
  const factory = (await import(new URL('gs.js', ASSETS).href) as { default: Factory }).default
  const module = await factory({
    print: () => {},
    printErr,
    // Instantiated here (Emscripten's documented hook) to keep hold of the memory.
    instantiateWasm(imports: WebAssembly.Imports, receive: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void) {
      WebAssembly.instantiate(wasm, imports).then(({ instance, module }) => {
        memory = Object.values(instance.exports).find((e): e is WebAssembly.Memory => e instanceof WebAssembly.Memory)
        receive(instance, module)
      })
      return {}
    },
  })
  return { module, memory: () => memory }
}

export async function createGhostscriptEngine(): Promise<PdfEngine> {
  let errors: string[] = []
  const loaded = await loadGhostscript((line) => { if (errors.length < 20) errors.push(line) })
  const gs = loaded.module

  return {
    name: 'ghostscript',
    postscript(pdf: Uint8Array, options: PostScriptOptions): Uint8Array {
      errors = []
      gs.FS.writeFile('/in.pdf', pdf)
      try {
        const args = ['-dSAFER', '-dBATCH', '-dNOPAUSE', '-dQUIET', '-sDEVICE=ps2write', '-sOutputFile=/out.ps']
        if (options.pages.length !== options.pageCount) args.push(`-sPageList=${pageList(options.pages)}`)
        if (options.color === 'gray') args.push('-sColorConversionStrategy=Gray', '-sProcessColorModel=DeviceGray')
        if (options.password !== undefined) args.push(`-sPDFPassword=${options.password}`)
        args.push('/in.pdf')
        const code = gs.callMain(args)
        if (code !== 0) throw new GhostscriptError(`ghostscript exited with ${code}: ${errors.join(' | ').slice(0, 500)}`)
        return gs.FS.readFile('/out.ps')
      } finally {
        for (const path of ['/in.pdf', '/out.ps']) {
          try {
            gs.FS.unlink(path)
          } catch { /* not written */ }
        }
      }
    },
    memoryBytes() {
      return loaded.memory()?.buffer.byteLength ?? 0
    },
  }
}
