/** waitFor polls a URL until it answers 200 (10 s at most): a server just spawned is up. */
export async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(url)).ok) return
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${url} did not come up`)
}
