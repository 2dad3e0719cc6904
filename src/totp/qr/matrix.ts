/**
 * QR symbols are built by the `qrcode` package (Reed-Solomon, placement, masking) from the
 * segments and version that `planSymbol` chose; this module exposes the module matrix and
 * the capacity limits.
 */
import QRCode from 'qrcode'
import { planSymbol, type Plan } from './segments.ts'

export const ECC_LEVELS = ['L', 'M', 'Q', 'H'] as const
export type Ecc = (typeof ECC_LEVELS)[number]

/** Capacity of version 40 at each level (ISO/IEC 18004 table 7): bytes, alphanumeric, digits. */
export const CAPACITY: Record<Ecc, { bytes: number; alphanumeric: number; numeric: number }> = {
  L: { bytes: 2953, alphanumeric: 4296, numeric: 7089 },
  M: { bytes: 2331, alphanumeric: 3391, numeric: 5596 },
  Q: { bytes: 1663, alphanumeric: 2420, numeric: 3993 },
  H: { bytes: 1273, alphanumeric: 1852, numeric: 3057 },
}

export interface Matrix {
  /** Modules per side, without the quiet zone. */
  readonly size: number
  /** Row-major, 1 for a dark module. */
  readonly data: Uint8Array
}

/** modulesOf gives the modules per side of a version. */
export function modulesOf(version: number): number {
  return 17 + 4 * version
}

/** matrixOfPlan builds the symbol a plan describes. */
export function matrixOfPlan(plan: Plan, ecc: Ecc): Matrix {
  const segments = plan.segments.map((s) => ({ data: s.data, mode: s.mode }) as QRCode.QRCodeSegment)
  const qr = QRCode.create(segments, { errorCorrectionLevel: ecc, version: plan.version })
  return { size: qr.modules.size, data: qr.modules.data }
}

/** buildMatrix returns null when the text does not fit in a QR code at this level. */
export function buildMatrix(text: string, ecc: Ecc): Matrix | null {
  const plan = planSymbol(text, ecc)
  return plan === null ? null : matrixOfPlan(plan, ecc)
}
