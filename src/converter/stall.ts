import type { ServerResponse } from 'node:http'

/**
 * dropWhenStalled destroys a streaming answer whose client has taken no bytes for `ms` while
 * bytes were waiting for it (time the engine spends making the next piece does not count).
 * Destroying the answer closes it, which cancels its conversion and frees the worker.
 */
export function dropWhenStalled(res: ServerResponse, ms: number, onDrop: () => void): void {
  const socket = res.socket
  if (socket === null) return
  let written = socket.bytesWritten
  let since = Date.now()
  const timer = setInterval(
    () => {
      const now = Date.now()
      if (socket.bytesWritten !== written || !res.writableNeedDrain) {
        written = socket.bytesWritten
        since = now
      } else if (now - since >= ms) {
        clearInterval(timer)
        onDrop()
        res.destroy()
      }
    },
    Math.max(20, Math.min(1000, ms / 5)),
  )
  timer.unref()
  res.once('close', () => clearInterval(timer))
}
