/**
 * The key version of a sealed value (`v<version>.<body>`, crypto/keyring.ts) read in SQLite, for
 * counting values per version without reading them out; a value of another form reads as 0.
 */
export const SEALED_VERSION_SQLITE = (column: string): string =>
  `CASE WHEN ${column} GLOB 'v[0-9]*.*' THEN CAST(substr(${column}, 2, instr(${column}, '.') - 2) AS INTEGER) ELSE 0 END`
