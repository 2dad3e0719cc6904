/**
 * batchedReads: one round trip for the reads many requests make at once. The reads asked in one
 * turn of the event loop (the requests parsed from one poll of the sockets) go in one query when
 * the turn ends (setImmediate), at most `max` to a query; a read asked alone goes alone, by its
 * own statement. Each caller gets its own answer, or the batch's error.
 *
 * Why: on PostgreSQL a managed factor's verification is one read besides what a stateless code
 * costs, and the cost of a read at load is mostly its round trip (measured: the node's socket
 * writes to PostgreSQL were the largest share of its CPU, more than the rows). Fifty
 * verifications at once then cost a few queries, not fifty.
 */
export function batchedReads<K, V>(one: (key: K) => Promise<V>, many: (keys: readonly K[]) => Promise<V[]>, max = 64): (key: K) => Promise<V> {
  interface Waiting {
    readonly key: K
    resolve(value: V): void
    reject(error: unknown): void
  }
  let waiting: Waiting[] = []
  const flush = () => {
    const batch = waiting
    waiting = []
    if (batch.length === 0) return
    if (batch.length === 1) {
      const [only] = batch as [Waiting]
      one(only.key).then(only.resolve, only.reject)
      return
    }
    many(batch.map((w) => w.key)).then(
      (values) => {
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(values[i]!)
      },
      (error: unknown) => {
        for (const w of batch) w.reject(error)
      },
    )
  }
  return (key) =>
    new Promise<V>((resolve, reject) => {
      waiting.push({ key, resolve, reject })
      if (waiting.length === 1) setImmediate(flush)
      else if (waiting.length >= max) flush()
    })
}
