/**
 * Versioned schema migrations, applied in order at start-up inside one transaction each.
 * Never edit a migration that has shipped: add the next one.
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'accounts, keys, subscriptions, onboarding, verification state',
    sql: `
      CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id),
        name TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
      CREATE INDEX api_keys_account ON api_keys(account_id);
      CREATE TABLE subscriptions (
        account_id TEXT NOT NULL REFERENCES accounts(id),
        region TEXT NOT NULL,
        api_group TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'inactive')),
        updated_at TEXT NOT NULL,
        PRIMARY KEY (account_id, region, api_group)
      );
      CREATE TABLE onboarding (
        account_id TEXT NOT NULL REFERENCES accounts(id),
        application_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        algorithm TEXT NOT NULL,
        digits INTEGER NOT NULL,
        period INTEGER NOT NULL,
        secret_fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (account_id, application_id, user_id)
      );
      CREATE TABLE otp_state (
        key TEXT PRIMARY KEY,
        last_step INTEGER NOT NULL DEFAULT -1,
        failures INTEGER NOT NULL DEFAULT 0,
        locked_until INTEGER NOT NULL DEFAULT 0,
        updated_at INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX otp_state_updated ON otp_state(updated_at);
    `,
  },
]
