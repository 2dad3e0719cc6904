/** A QR worker: draws one large QR code at a time for QrDrawer, off the event loop. */
import { parentPort } from 'node:worker_threads'
import { drawQr } from './draw.ts'
import { planSymbol } from './segments.ts'
import type { FromQrWorker, ToQrWorker } from './drawer.ts'

if (parentPort === null) throw new Error('worker.ts runs as a worker thread')
const port = parentPort

port.on('message', ({ id, job }: ToQrWorker) => {
  let answer: FromQrWorker
  try {
    const plan = planSymbol(job.text, job.ecc)
    if (plan === null) throw new Error('the text fits in no QR code') // the drawer planned it already
    answer = { id, image: drawQr(job, plan) }
  } catch (error) {
    // The name only: a message may quote the text, and QR texts carry secrets (otpauth URLs).
    answer = { id, error: `drawing failed (${(error as Error).name})` }
  }
  port.postMessage(answer)
})
