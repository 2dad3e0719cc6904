/**
 * The key version of a sealed value (`v<version>.<body>`, crypto/keyring.ts) read in PostgreSQL,
 * for counting values per version without reading them out; a value of another form reads as 0.
 */
export const SEALED_VERSION_POSTGRES = (column: string): string =>
  `CASE WHEN ${column} ~ '^v[0-9]{1,9}\\.' THEN split_part(substr(${column}, 2), '.', 1)::integer ELSE 0 END`
