/**
 * FairQueue holds the conversions waiting for a worker, one line per account, and gives the
 * next one to the account with the fewest conversions running; among equals, to the one whose
 * last turn is oldest, an account that has just begun to wait first (round-robin). One
 * account's backlog then never stands before another account's conversion: a newcomer waits
 * for the next free worker, not for the backlog (a first-come queue made it wait for all of it).
 */
export class FairQueue<T> {
  /** Each account's waiting items, oldest first, and when it last had a turn (-1: never, since it began waiting). */
  readonly #lines = new Map<string, { readonly items: T[]; turn: number }>()
  #turns = 0
  #size = 0

  get size(): number {
    return this.#size
  }

  push(account: string, item: T): void {
    const line = this.#lines.get(account)
    if (line === undefined) this.#lines.set(account, { items: [item], turn: -1 })
    else line.items.push(item)
    this.#size++
  }

  /** shift takes the next item: from the account with the fewest `running`, the one whose last turn is oldest among equals. */
  shift(running: (account: string) => number): T | undefined {
    let chosen: { readonly items: T[]; turn: number } | undefined
    let account = ''
    let fewest = Infinity
    for (const [name, line] of this.#lines) {
      const n = running(name)
      if (n < fewest || (n === fewest && line.turn < chosen!.turn)) {
        chosen = line
        account = name
        fewest = n
      }
    }
    if (chosen === undefined) return undefined
    const item = chosen.items.shift()!
    this.#size--
    chosen.turn = this.#turns++
    if (chosen.items.length === 0) this.#lines.delete(account)
    return item
  }

  /** waitsBesides: whether an account other than `account` has an item waiting. */
  waitsBesides(account: string): boolean {
    for (const name of this.#lines.keys()) if (name !== account) return true
    return false
  }

  /** remove takes `item` out of its account's line; false when it is not waiting. */
  remove(account: string, item: T): boolean {
    const line = this.#lines.get(account)
    const at = line?.items.indexOf(item) ?? -1
    if (at < 0) return false
    line!.items.splice(at, 1)
    this.#size--
    if (line!.items.length === 0) this.#lines.delete(account)
    return true
  }

  /** drain empties the queue and gives every item that was waiting. */
  drain(): T[] {
    const all = [...this.#lines.values()].flatMap((line) => line.items)
    this.#lines.clear()
    this.#size = 0
    return all
  }
}
