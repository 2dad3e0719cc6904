/** The portal's keys pages (issue 13: to come). */
import type { FastifyInstance } from 'fastify'
import type { Kit } from './kit.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = ''

export default async function keysPages(_app: FastifyInstance, _kit: Kit): Promise<void> {}
