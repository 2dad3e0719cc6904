/**
 * The baseline of the benchmark: a bare Fastify server whose routes take the same
 * requests as the real ones (same method, same form body, read but not parsed) and answer
 * a precomputed JSON body of a given size. No logger, no plugins.
 */
import Fastify from 'fastify'

const app = Fastify({ logger: false })
app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => done(null, body))

const bodies = new Map<number, string>()
function bodyOf(size: number): string {
  let body = bodies.get(size)
  if (body === undefined) {
    const filler = Math.max(0, size - '{"type":"Success","pad":""}'.length)
    body = JSON.stringify({ type: 'Success', pad: 'x'.repeat(filler) })
    bodies.set(size, body)
  }
  return body
}

const reply = (size: string | undefined) => bodyOf(Number(size ?? 40))
app.get<{ Params: { size: string } }>('/bare/:size', async (req, res) => res.type('application/json; charset=utf-8').send(reply(req.params.size)))
app.post<{ Params: { size: string } }>('/bare/:size', async (req, res) => res.type('application/json; charset=utf-8').send(reply(req.params.size)))

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' })
const address = app.server.address()
process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : ''}\n`)
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0))
})
