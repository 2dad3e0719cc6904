/**
 * Versioned schema migrations, one list for both relational stores: each version has its
 * SQLite and its PostgreSQL text, and both adapters apply the versions they have not
 * recorded, in order, one transaction each, at start-up (and on `npm run admin -- migrate`).
 * Never edit a migration that has shipped: add the next one.
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sqlite: string
  readonly postgres: string
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'accounts, keys, subscriptions, onboarding, verification state',
    sqlite: `
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
    postgres: `
      CREATE TABLE accounts (
        id text PRIMARY KEY,
        name text NOT NULL,
        status text NOT NULL CHECK (status IN ('active', 'suspended')),
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts(id),
        name text NOT NULL,
        key_hash text NOT NULL UNIQUE,
        hint text NOT NULL,
        created_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
      CREATE INDEX api_keys_account ON api_keys(account_id);
      CREATE TABLE subscriptions (
        account_id text NOT NULL REFERENCES accounts(id),
        region text NOT NULL,
        api_group text NOT NULL,
        status text NOT NULL CHECK (status IN ('active', 'inactive')),
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (account_id, region, api_group)
      );
      CREATE TABLE onboarding (
        account_id text NOT NULL REFERENCES accounts(id),
        application_id text NOT NULL,
        user_id text NOT NULL,
        algorithm text NOT NULL,
        digits integer NOT NULL,
        period integer NOT NULL,
        secret_fingerprint text NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (account_id, application_id, user_id)
      );
      CREATE TABLE otp_state (
        key text PRIMARY KEY,
        last_step bigint NOT NULL DEFAULT -1,
        failures integer NOT NULL DEFAULT 0,
        locked_until bigint NOT NULL DEFAULT 0,
        updated_at bigint NOT NULL
      );
      CREATE INDEX otp_state_updated ON otp_state(updated_at);
    `,
  },
  {
    version: 2,
    name: 'usage plans and daily usage counts',
    sqlite: `
      CREATE TABLE plans (
        account_id TEXT PRIMARY KEY REFERENCES accounts(id),
        rate REAL NOT NULL CHECK (rate >= 0),
        burst INTEGER NOT NULL CHECK (burst >= 1),
        quota INTEGER NOT NULL CHECK (quota >= 0),
        period TEXT NOT NULL CHECK (period IN ('day', 'month')),
        updated_at TEXT NOT NULL
      );
      CREATE TABLE usage_daily (
        account_id TEXT NOT NULL,
        day TEXT NOT NULL,
        api_group TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (account_id, day, api_group)
      ) WITHOUT ROWID;
    `,
    postgres: `
      CREATE TABLE plans (
        account_id text PRIMARY KEY REFERENCES accounts(id),
        rate double precision NOT NULL CHECK (rate >= 0),
        burst integer NOT NULL CHECK (burst >= 1),
        quota bigint NOT NULL CHECK (quota >= 0),
        period text NOT NULL CHECK (period IN ('day', 'month')),
        updated_at timestamptz NOT NULL
      );
      CREATE TABLE usage_daily (
        account_id text NOT NULL,
        day text NOT NULL,
        api_group text NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (account_id, day, api_group)
      );
    `,
  },
  {
    version: 3,
    name: 'onboarding records found by secret fingerprint',
    sqlite: `
      CREATE INDEX onboarding_secret ON onboarding(account_id, secret_fingerprint);
    `,
    postgres: `
      CREATE INDEX onboarding_secret ON onboarding(account_id, secret_fingerprint);
    `,
  },
]
