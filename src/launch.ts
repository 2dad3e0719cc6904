/**
 * LAUNCH_ENV: what the server's process environment must hold from its start, before Node or
 * glibc read it, so it is set where the process is launched: the image (Dockerfile `ENV`),
 * `npm start` (package.json), and every script or test that spawns src/server.ts. A check
 * (test/checks/launch.test.ts) holds the Dockerfile and package.json to it.
 *
 * GLIBC_TUNABLES fixes glibc's mmap threshold at 128 KiB (its default start): glibc otherwise
 * raises it to the size of each large block freed (up to 32 MiB), so that after one large
 * conversion the documents, pages and outputs of later ones, up to that size, come from the
 * threads' malloc arenas, which keep the freed memory. Measured with `SOAK_SECONDS=20 npm run
 * soak` (docs/performance.md): the node's RSS 10 s after the load +181 MiB without it (arenas
 * 71 → 203 MiB), +55 MiB with it (arenas 50 → 52 MiB). glibc ignores it elsewhere (musl, macOS).
 */
export const LAUNCH_ENV: Readonly<Record<string, string>> = Object.freeze({ GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=131072' })
