/**
 * The engines' WebAssembly memory, capped while they run. Both engines are Emscripten builds
 * whose heap grows through one call, `memory.grow`, made from JavaScript (Emscripten's heap
 * resize, wrapped in a try: a growth that throws is a malloc that returns null). Giving the
 * Memory object a `grow` of its own lets the worker refuse a growth that would take it past
 * its budget: the engine's malloc fails, MuPDF and Ghostscript stop with their own memory
 * error (or draw without what they could not allocate), and the worker, told, ends the job
 * with CONVERSION_MEMORY_EXCEEDED. A WebAssembly memory never shrinks: what a job grew is
 * given back by replacing the worker.
 */

/** HeapGuard decides a growth: `allow(bytes)` whether the engine may take `bytes` more; `refused()` is told when it may not. */
export interface HeapGuard {
  allow(bytes: number): boolean
  refused(): void
}

const PAGE = 65536

/** guardMemory makes every growth of `memory` ask `guard` first. */
export function guardMemory(memory: WebAssembly.Memory, guard: HeapGuard): void {
  const grow = WebAssembly.Memory.prototype.grow
  Object.defineProperty(memory, 'grow', {
    value(delta: number): number {
      if (!guard.allow(delta * PAGE)) {
        guard.refused()
        throw new RangeError("WebAssembly.Memory.grow(): the worker's memory budget is spent")
      }
      return grow.call(memory, delta)
    },
  })
}

/** memoryOf finds the instance's memory (Emscripten exports it under a minified name). */
function memoryOf(instance: WebAssembly.Instance): WebAssembly.Memory {
  const memory = Object.values(instance.exports).find((e): e is WebAssembly.Memory => e instanceof WebAssembly.Memory)
  if (memory === undefined) throw new Error('the engine exports no WebAssembly memory')
  return memory
}

type Receive = (instance: WebAssembly.Instance, module: WebAssembly.Module) => void

/**
 * instantiateGuarded is an Emscripten `instantiateWasm` hook (its documented way to
 * instantiate the module oneself): it instantiates `wasm`, guards the memory with `guard`
 * (none: uncapped) and gives it to `onMemory`.
 */
export function instantiateGuarded(wasm: BufferSource, guard: HeapGuard | undefined, onMemory: (memory: WebAssembly.Memory) => void) {
  return (imports: WebAssembly.Imports, receive: Receive): object => {
    WebAssembly.instantiate(wasm, imports).then(
      ({ instance, module }) => {
        const memory = memoryOf(instance)
        if (guard !== undefined) guardMemory(memory, guard)
        onMemory(memory)
        receive(instance, module)
      },
      (error: unknown) => {
        // Emscripten waits for `receive`: without it the worker would hang at start-up.
        queueMicrotask(() => {
          throw error
        })
      },
    )
    return {}
  }
}
