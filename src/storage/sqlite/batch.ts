/**
 * GroupCommit: the SQLite store's one way to write (see the class comment).
 */
import type { DatabaseSync } from 'node:sqlite'

/**
 * GroupCommit runs writes at once, inside one BEGIN IMMEDIATE transaction per turn of the
 * event loop, and resolves each caller once that transaction has committed: a commit costs
 * about ten times one upsert, so under load many verifications share it. Results are
 * computed synchronously inside the transaction, so each write stays atomic (across
 * processes too), and nobody is answered before their write is durable.
 */
export class GroupCommit {
  readonly #db: DatabaseSync
  #open = false
  #waiting: { resolve: () => void; reject: (error: unknown) => void }[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
  }

  run<T>(work: () => T): Promise<T> {
    if (!this.#open) {
      this.#db.exec('BEGIN IMMEDIATE')
      this.#open = true
      setImmediate(() => this.flush())
    }
    let result: T
    try {
      result = work()
    } catch (error) {
      // A failed statement is undone on its own; the others in the transaction stand.
      return Promise.reject(error)
    }
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push({ resolve: () => resolve(result), reject })
    })
  }

  /**
   * atomic runs several statements as one: inside the turn's transaction, a SAVEPOINT makes
   * them all or nothing (a failed one undoes the others and rejects), the rest of the turn's
   * writes standing.
   */
  atomic<T>(work: () => T): Promise<T> {
    return this.run(() => {
      this.#db.exec('SAVEPOINT atomic')
      try {
        const result = work()
        this.#db.exec('RELEASE atomic')
        return result
      } catch (error) {
        this.#db.exec('ROLLBACK TO atomic')
        this.#db.exec('RELEASE atomic')
        throw error
      }
    })
  }

  /** flush commits the open transaction, if any, and answers its callers. */
  flush(): void {
    if (!this.#open) return
    this.#open = false
    const waiting = this.#waiting
    this.#waiting = []
    try {
      this.#db.exec('COMMIT')
    } catch (error) {
      // Every caller is answered, whatever the rollback does: on a closed connection even isTransaction throws, and a throw here
      // (in a setImmediate) would leave them waiting for good and end the process.
      try {
        if (this.#db.isOpen && this.#db.isTransaction) this.#db.exec('ROLLBACK')
      } catch {
        // Nothing left to undo: the connection is gone, and its transaction with it.
      }
      for (const w of waiting) w.reject(error)
      return
    }
    for (const w of waiting) w.resolve()
  }
}
