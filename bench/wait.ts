/** waitFor polls a URL until it answers 200 (10 s at most): a server just spawned is up. */
export async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(url)).ok) return
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${url} did not come up`)
}

/**
 * demoServer waits until `child`, a server just spawned on `port` with its stdout piped and
 * an empty store, answers, and reads the demo key it prints: the server's URL and that key.
 */
export async function demoServer(child: import('node:child_process').ChildProcess, port: number): Promise<{ url: string; key: string }> {
  process.on('exit', () => child.kill('SIGKILL'))
  let out = ''
  child.stdout!.on('data', (d) => {
    out += d
  })
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/healthz`)
  for (let i = 0; i < 100 && !/tsr_[0-9a-f]{40}/.test(out); i++) await new Promise((r) => setTimeout(r, 50))
  return { url, key: /tsr_[0-9a-f]{40}/.exec(out)?.[0] ?? '' }
}
