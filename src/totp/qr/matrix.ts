/**
 * QR symbols are built by the `qrcode` package (mode selection, Reed-Solomon, masking);
 * this module only exposes its module matrix and the capacity limits.
 */
import QRCode from 'qrcode'

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

/** buildMatrix returns null when the text does not fit in a QR code at this level. */
export function buildMatrix(text: string, ecc: Ecc): Matrix | null {
  let qr: QRCode.QRCode
  try {
    qr = QRCode.create(text, { errorCorrectionLevel: ecc })
  } catch (error) {
    if (error instanceof Error && /too big/i.test(error.message)) return null
    throw error
  }
  return { size: qr.modules.size, data: qr.modules.data }
}
