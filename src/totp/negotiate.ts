/** pickQrOutput chooses the QR answer from the `format` field and the Accept header. */
export type QrOutput = { readonly format: 'png' | 'svg'; readonly json: boolean }

const OFFERED = ['image/png', 'image/svg+xml', 'application/json'] as const

/** preferred returns the offered type the Accept header ranks highest (ties go to the order offered). */
function preferred(accept: string | undefined): (typeof OFFERED)[number] {
  if (!accept) return 'image/png'
  let best: (typeof OFFERED)[number] = 'image/png'
  let bestQ = -1
  let bestSpecific = -1
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.trim().toLowerCase().split(';')
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='))
    const q = qParam ? Number(qParam.slice(2)) : 1
    if (!(q > 0)) continue
    for (const type of OFFERED) {
      const [major] = type.split('/')
      const specific = range === type ? 2 : range === `${major}/*` ? 1 : range === '*/*' ? 0 : -1
      if (specific < 0) continue
      if (q > bestQ || (q === bestQ && specific > bestSpecific)) {
        best = type
        bestQ = q
        bestSpecific = specific
      }
    }
  }
  return best
}

export function pickQrOutput(format: string | undefined, accept: string | undefined): QrOutput {
  const type = preferred(accept)
  const chosen = format === 'svg' || format === 'png' ? format : type === 'image/svg+xml' ? 'svg' : 'png'
  return { format: chosen, json: type === 'application/json' }
}
