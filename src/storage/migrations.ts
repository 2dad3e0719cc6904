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
  {
    version: 4,
    name: 'keys that expire, roll and are scoped; pending subscriptions; plan weights; usage per key and region; audit trail; admin tokens',
    sqlite: `
      ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
      ALTER TABLE api_keys ADD COLUMN scope_groups TEXT;
      ALTER TABLE api_keys ADD COLUMN scope_regions TEXT;
      ALTER TABLE api_keys ADD COLUMN rolled_to TEXT;
      ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
      ALTER TABLE api_keys ADD COLUMN last_used_region TEXT;
      CREATE TABLE subscriptions_v4 (
        account_id TEXT NOT NULL REFERENCES accounts(id),
        region TEXT NOT NULL,
        api_group TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'inactive', 'pending')),
        updated_at TEXT NOT NULL,
        PRIMARY KEY (account_id, region, api_group)
      );
      INSERT INTO subscriptions_v4 SELECT account_id, region, api_group, status, updated_at FROM subscriptions;
      DROP TABLE subscriptions;
      ALTER TABLE subscriptions_v4 RENAME TO subscriptions;
      ALTER TABLE plans ADD COLUMN weight_totp INTEGER NOT NULL DEFAULT 1 CHECK (weight_totp >= 0);
      ALTER TABLE plans ADD COLUMN weight_converter INTEGER NOT NULL DEFAULT 1 CHECK (weight_converter >= 0);
      ALTER TABLE usage_daily ADD COLUMN units INTEGER NOT NULL DEFAULT 0;
      UPDATE usage_daily SET units = count;
      CREATE TABLE usage_keys (
        account_id TEXT NOT NULL,
        day TEXT NOT NULL,
        key_id TEXT NOT NULL,
        api_group TEXT NOT NULL,
        count INTEGER NOT NULL,
        units INTEGER NOT NULL,
        PRIMARY KEY (account_id, day, key_id, api_group)
      ) WITHOUT ROWID;
      CREATE TABLE usage_keys_monthly (
        account_id TEXT NOT NULL,
        month TEXT NOT NULL,
        key_id TEXT NOT NULL,
        api_group TEXT NOT NULL,
        count INTEGER NOT NULL,
        units INTEGER NOT NULL,
        PRIMARY KEY (account_id, month, key_id, api_group)
      ) WITHOUT ROWID;
      CREATE TABLE usage_regions (
        account_id TEXT NOT NULL,
        day TEXT NOT NULL,
        region TEXT NOT NULL,
        api_group TEXT NOT NULL,
        count INTEGER NOT NULL,
        units INTEGER NOT NULL,
        PRIMARY KEY (account_id, day, region, api_group)
      ) WITHOUT ROWID;
      CREATE INDEX accounts_created ON accounts(created_at, id);
      CREATE TABLE audit_events (
        id TEXT PRIMARY KEY,
        at TEXT NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        target_type TEXT NOT NULL,
        target_id TEXT NOT NULL,
        account_id TEXT,
        ip TEXT,
        outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure')),
        detail TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX audit_events_account ON audit_events(account_id, id);
      CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
        BEGIN SELECT RAISE(ABORT, 'audit events cannot be changed'); END;
      CREATE TABLE admin_tokens (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
        token_hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
    `,
    postgres: `
      ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
      ALTER TABLE api_keys ADD COLUMN scope_groups text;
      ALTER TABLE api_keys ADD COLUMN scope_regions text;
      ALTER TABLE api_keys ADD COLUMN rolled_to text;
      ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
      ALTER TABLE api_keys ADD COLUMN last_used_region text;
      ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_status_check;
      ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_status_check CHECK (status IN ('active', 'inactive', 'pending'));
      ALTER TABLE plans ADD COLUMN weight_totp integer NOT NULL DEFAULT 1 CHECK (weight_totp >= 0);
      ALTER TABLE plans ADD COLUMN weight_converter integer NOT NULL DEFAULT 1 CHECK (weight_converter >= 0);
      ALTER TABLE usage_daily ADD COLUMN units bigint NOT NULL DEFAULT 0;
      UPDATE usage_daily SET units = count;
      CREATE TABLE usage_keys (
        account_id text NOT NULL,
        day text NOT NULL,
        key_id text NOT NULL,
        api_group text NOT NULL,
        count bigint NOT NULL,
        units bigint NOT NULL,
        PRIMARY KEY (account_id, day, key_id, api_group)
      );
      CREATE TABLE usage_keys_monthly (
        account_id text NOT NULL,
        month text NOT NULL,
        key_id text NOT NULL,
        api_group text NOT NULL,
        count bigint NOT NULL,
        units bigint NOT NULL,
        PRIMARY KEY (account_id, month, key_id, api_group)
      );
      CREATE TABLE usage_regions (
        account_id text NOT NULL,
        day text NOT NULL,
        region text NOT NULL,
        api_group text NOT NULL,
        count bigint NOT NULL,
        units bigint NOT NULL,
        PRIMARY KEY (account_id, day, region, api_group)
      );
      CREATE INDEX accounts_created ON accounts(created_at, id);
      -- Account search by any part of the name (ILIKE '%…%') reads every row without a trigram
      -- index (about 110 ms for 100 000 accounts). pg_trgm ships with PostgreSQL and is a trusted
      -- extension; where it cannot be had (no privilege, a trimmed build), search still works, slower.
      DO $$ BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
      EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'pg_trgm is not available (%): account search by name reads every account', SQLERRM;
      END $$;
      DO $$ BEGIN
        CREATE INDEX accounts_name_trgm ON accounts USING gin (name public.gin_trgm_ops);
      EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'no trigram index on account names (%)', SQLERRM;
      END $$;
      CREATE TABLE audit_events (
        id text PRIMARY KEY,
        at timestamptz NOT NULL,
        actor text NOT NULL,
        action text NOT NULL,
        target_type text NOT NULL,
        target_id text NOT NULL,
        account_id text,
        ip text,
        outcome text NOT NULL CHECK (outcome IN ('success', 'failure')),
        detail jsonb NOT NULL
      );
      CREATE INDEX audit_events_account ON audit_events(account_id, id);
      CREATE FUNCTION audit_events_immutable() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'audit events cannot be changed'; END $$;
      CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
        FOR EACH ROW EXECUTE FUNCTION audit_events_immutable();
      CREATE TABLE admin_tokens (
        id text PRIMARY KEY,
        name text NOT NULL,
        scope text NOT NULL CHECK (scope IN ('read', 'write')),
        token_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
    `,
  },
  {
    version: 5,
    name: 'portal users, team members, sessions, email tokens, recovery codes',
    sqlite: `
      -- Portal users. The email is unique by its key (emailKey in domain/portal.ts: lowercased in code, so
      -- that both stores fold alike) and kept as given. totp_secret is the user's own
      -- two-factor secret, kept as given: it must be read back to check codes, and its
      -- encryption at rest is an issue of its own.
      CREATE TABLE users (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        email_key TEXT NOT NULL UNIQUE,
        password_hash TEXT,
        email_verified_at TEXT,
        status TEXT NOT NULL CHECK (status IN ('active', 'pending', 'disabled')),
        operator INTEGER NOT NULL CHECK (operator IN (0, 1)),
        totp_secret TEXT,
        totp_enabled_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX users_created ON users(created_at, id);
      CREATE TABLE members (
        account_id TEXT NOT NULL REFERENCES accounts(id),
        user_id TEXT NOT NULL REFERENCES users(id),
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
        created_at TEXT NOT NULL,
        PRIMARY KEY (account_id, user_id)
      );
      CREATE INDEX members_user ON members(user_id);
      -- Only a hash of a session's id is kept.
      CREATE TABLE sessions (
        id_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        two_factor_pending INTEGER NOT NULL CHECK (two_factor_pending IN (0, 1)),
        ip TEXT,
        user_agent TEXT
      );
      CREATE INDEX sessions_user ON sessions(user_id);
      CREATE INDEX sessions_expires ON sessions(expires_at);
      CREATE TABLE email_tokens (
        token_hash TEXT PRIMARY KEY,
        purpose TEXT NOT NULL CHECK (purpose IN ('verify-email', 'reset-password', 'invite')),
        email TEXT NOT NULL,
        user_id TEXT REFERENCES users(id),
        account_id TEXT REFERENCES accounts(id),
        role TEXT CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT
      );
      CREATE INDEX email_tokens_account ON email_tokens(account_id) WHERE account_id IS NOT NULL;
      CREATE INDEX email_tokens_expires ON email_tokens(expires_at);
      CREATE TABLE recovery_codes (
        user_id TEXT NOT NULL REFERENCES users(id),
        code_hash TEXT NOT NULL,
        used_at TEXT,
        PRIMARY KEY (user_id, code_hash)
      ) WITHOUT ROWID;
    `,
    postgres: `
      -- Portal users. The email is unique by its key (emailKey in domain/portal.ts: lowercased in code, so
      -- that both stores fold alike) and kept as given. totp_secret is the user's own
      -- two-factor secret, kept as given: it must be read back to check codes, and its
      -- encryption at rest is an issue of its own.
      CREATE TABLE users (
        id text PRIMARY KEY,
        email text NOT NULL,
        email_key text NOT NULL UNIQUE,
        password_hash text,
        email_verified_at timestamptz,
        status text NOT NULL CHECK (status IN ('active', 'pending', 'disabled')),
        operator boolean NOT NULL,
        totp_secret text,
        totp_enabled_at timestamptz,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE INDEX users_created ON users(created_at, id);
      CREATE TABLE members (
        account_id text NOT NULL REFERENCES accounts(id),
        user_id text NOT NULL REFERENCES users(id),
        role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
        created_at timestamptz NOT NULL,
        PRIMARY KEY (account_id, user_id)
      );
      CREATE INDEX members_user ON members(user_id);
      -- Only a hash of a session's id is kept.
      CREATE TABLE sessions (
        id_hash text PRIMARY KEY,
        user_id text NOT NULL REFERENCES users(id),
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        last_seen_at timestamptz NOT NULL,
        two_factor_pending boolean NOT NULL,
        ip text,
        user_agent text
      );
      CREATE INDEX sessions_user ON sessions(user_id);
      CREATE INDEX sessions_expires ON sessions(expires_at);
      CREATE TABLE email_tokens (
        token_hash text PRIMARY KEY,
        purpose text NOT NULL CHECK (purpose IN ('verify-email', 'reset-password', 'invite')),
        email text NOT NULL,
        user_id text REFERENCES users(id),
        account_id text REFERENCES accounts(id),
        role text CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at timestamptz
      );
      CREATE INDEX email_tokens_account ON email_tokens(account_id) WHERE account_id IS NOT NULL;
      CREATE INDEX email_tokens_expires ON email_tokens(expires_at);
      CREATE TABLE recovery_codes (
        user_id text NOT NULL REFERENCES users(id),
        code_hash text NOT NULL,
        used_at timestamptz,
        PRIMARY KEY (user_id, code_hash)
      );
    `,
  },
  {
    version: 6,
    name: "the operators' queue of pending subscriptions",
    // Partial: the queue reads the few pending rows in order, never the whole table (bench/pending.ts:
    // 50 of 1 000 pending among 400 000 subscriptions, 163 ms → 0.27 ms on SQLite, 258 → 4.3 ms on PostgreSQL).
    sqlite: `CREATE INDEX subscriptions_pending ON subscriptions (updated_at, account_id, region, api_group) WHERE status = 'pending';`,
    postgres: `CREATE INDEX subscriptions_pending ON subscriptions (updated_at, account_id, region, api_group) WHERE status = 'pending';`,
  },
  {
    version: 7,
    name: "managed TOTP factors (sealed secrets) and their users' recovery codes",
    sqlite: `
      CREATE TABLE totp_users (
        account_id TEXT NOT NULL REFERENCES accounts(id),
        user_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (account_id, user_id)
      );
      CREATE TABLE totp_factors (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        application_id TEXT NOT NULL,
        label TEXT,
        profile TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'active')),
        algorithm TEXT NOT NULL,
        digits INTEGER NOT NULL,
        period INTEGER NOT NULL,
        drift INTEGER NOT NULL DEFAULT 0,
        sealed TEXT NOT NULL,
        key_version INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        activated_at TEXT,
        FOREIGN KEY (account_id, user_id) REFERENCES totp_users(account_id, user_id) ON DELETE CASCADE
      );
      CREATE INDEX totp_factors_user ON totp_factors (account_id, user_id, created_at);
      CREATE INDEX totp_factors_key_version ON totp_factors (key_version, id);
      CREATE INDEX totp_factors_pending ON totp_factors (expires_at) WHERE status = 'pending';
      CREATE TABLE totp_recovery_codes (
        account_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        code_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        used_at TEXT,
        PRIMARY KEY (account_id, user_id, code_hash),
        FOREIGN KEY (account_id, user_id) REFERENCES totp_users(account_id, user_id) ON DELETE CASCADE
      );
    `,
    postgres: `
      CREATE TABLE totp_users (
        account_id text NOT NULL REFERENCES accounts(id),
        user_id text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (account_id, user_id)
      );
      CREATE TABLE totp_factors (
        id text PRIMARY KEY,
        account_id text NOT NULL,
        user_id text NOT NULL,
        application_id text NOT NULL,
        label text,
        profile text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'active')),
        algorithm text NOT NULL,
        digits integer NOT NULL,
        period integer NOT NULL,
        drift integer NOT NULL DEFAULT 0,
        sealed text NOT NULL,
        key_version integer NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz,
        activated_at timestamptz,
        FOREIGN KEY (account_id, user_id) REFERENCES totp_users(account_id, user_id) ON DELETE CASCADE
      );
      CREATE INDEX totp_factors_user ON totp_factors (account_id, user_id, created_at);
      CREATE INDEX totp_factors_key_version ON totp_factors (key_version, id);
      CREATE INDEX totp_factors_pending ON totp_factors (expires_at) WHERE status = 'pending';
      CREATE TABLE totp_recovery_codes (
        account_id text NOT NULL,
        user_id text NOT NULL,
        code_hash text NOT NULL,
        created_at timestamptz NOT NULL,
        used_at timestamptz,
        PRIMARY KEY (account_id, user_id, code_hash),
        FOREIGN KEY (account_id, user_id) REFERENCES totp_users(account_id, user_id) ON DELETE CASCADE
      );
    `,
  },
  {
    version: 8,
    name: 'webhook endpoints and the outbox their deliveries come from, fed by the audit trail',
    sqlite: `
      -- The audit actions that are also webhook events (domain/events.ts). A later event type is a row added by a later migration.
      CREATE TABLE webhook_event_types (type TEXT PRIMARY KEY) WITHOUT ROWID;
      INSERT INTO webhook_event_types (type) VALUES ('factor.created'), ('factor.activated'), ('factor.deleted'),
        ('factor.verification_failed'), ('factor.lockout_started'), ('recovery_code.used'), ('recovery_codes.regenerated');
      -- event_types: a comma list, NULL for every type. secret: sealed (webhooks/secret.ts), never the secret as given.
      CREATE TABLE webhook_endpoints (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id),
        url TEXT NOT NULL,
        event_types TEXT,
        secret TEXT NOT NULL,
        created_at TEXT NOT NULL,
        disabled_at TEXT
      );
      CREATE INDEX webhook_endpoints_account ON webhook_endpoints(account_id, created_at) WHERE disabled_at IS NULL;
      -- One message per event that had somewhere to go; its id is the audit event's, the webhook-id.
      CREATE TABLE webhook_messages (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        at TEXT NOT NULL,
        data TEXT NOT NULL
      ) WITHOUT ROWID;
      -- One delivery per message and endpoint. Times in epoch ms: since_ms starts the retry window
      -- (the event, or a re-send); a pending delivery is due from next_at_ms, which a claim moves
      -- past its lease, so that one whose worker died is due again once the lease runs out.
      CREATE TABLE webhook_deliveries (
        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
        message_id TEXT NOT NULL REFERENCES webhook_messages(id),
        status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
        tries INTEGER NOT NULL,
        since_ms INTEGER NOT NULL,
        next_at_ms INTEGER NOT NULL,
        lease TEXT,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (endpoint_id, message_id)
      ) WITHOUT ROWID;
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_at_ms) WHERE status = 'pending';
      CREATE INDEX webhook_deliveries_done ON webhook_deliveries(updated_ms) WHERE status <> 'pending';
      CREATE INDEX webhook_deliveries_message ON webhook_deliveries(message_id);
      CREATE TABLE webhook_attempts (
        id TEXT PRIMARY KEY,
        endpoint_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        status_code INTEGER,
        duration_ms INTEGER NOT NULL,
        error TEXT
      );
      CREATE INDEX webhook_attempts_delivery ON webhook_attempts(endpoint_id, message_id, at_ms);
      -- The outbox is written by the insert of the event itself: in its transaction, whichever
      -- path wrote it (a change's SAVEPOINT, AuditStore.append), so an event and its deliveries
      -- commit or roll back together, and no write path has to remember the outbox.
      CREATE TRIGGER audit_events_webhooks AFTER INSERT ON audit_events
        WHEN NEW.account_id IS NOT NULL AND NEW.action IN (SELECT type FROM webhook_event_types)
          AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
            AND (e.event_types IS NULL OR instr(',' || e.event_types || ',', ',' || NEW.action || ',') > 0))
      BEGIN
        INSERT INTO webhook_messages (id, account_id, event_type, at, data) VALUES (NEW.id, NEW.account_id, NEW.action, NEW.at, NEW.detail);
        INSERT INTO webhook_deliveries (endpoint_id, message_id, status, tries, since_ms, next_at_ms, lease, updated_ms)
          SELECT e.id, NEW.id, 'pending', 0, t.ms, t.ms, NULL, t.ms
          FROM webhook_endpoints e, (SELECT CAST(round((julianday(NEW.at) - 2440587.5) * 86400000) AS INTEGER) AS ms) t
          WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
            AND (e.event_types IS NULL OR instr(',' || e.event_types || ',', ',' || NEW.action || ',') > 0);
      END;
    `,
    postgres: `
      -- The audit actions that are also webhook events (domain/events.ts). A later event type is a row added by a later migration.
      CREATE TABLE webhook_event_types (type text PRIMARY KEY);
      INSERT INTO webhook_event_types (type) VALUES ('factor.created'), ('factor.activated'), ('factor.deleted'),
        ('factor.verification_failed'), ('factor.lockout_started'), ('recovery_code.used'), ('recovery_codes.regenerated');
      -- event_types: a comma list, NULL for every type. secret: sealed (webhooks/secret.ts), never the secret as given.
      CREATE TABLE webhook_endpoints (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts(id),
        url text NOT NULL,
        event_types text,
        secret text NOT NULL,
        created_at timestamptz NOT NULL,
        disabled_at timestamptz
      );
      CREATE INDEX webhook_endpoints_account ON webhook_endpoints(account_id, created_at) WHERE disabled_at IS NULL;
      -- One message per event that had somewhere to go; its id is the audit event's, the webhook-id.
      CREATE TABLE webhook_messages (
        id text PRIMARY KEY,
        account_id text NOT NULL,
        event_type text NOT NULL,
        at timestamptz NOT NULL,
        data jsonb NOT NULL
      );
      -- One delivery per message and endpoint. Times in epoch ms: since_ms starts the retry window
      -- (the event, or a re-send); a pending delivery is due from next_at_ms, which a claim moves
      -- past its lease, so that one whose worker died is due again once the lease runs out.
      CREATE TABLE webhook_deliveries (
        endpoint_id text NOT NULL REFERENCES webhook_endpoints(id),
        message_id text NOT NULL REFERENCES webhook_messages(id),
        status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
        tries integer NOT NULL,
        since_ms bigint NOT NULL,
        next_at_ms bigint NOT NULL,
        lease text,
        updated_ms bigint NOT NULL,
        PRIMARY KEY (endpoint_id, message_id)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_at_ms) WHERE status = 'pending';
      CREATE INDEX webhook_deliveries_done ON webhook_deliveries(updated_ms) WHERE status <> 'pending';
      CREATE INDEX webhook_deliveries_message ON webhook_deliveries(message_id);
      CREATE TABLE webhook_attempts (
        id text PRIMARY KEY,
        endpoint_id text NOT NULL,
        message_id text NOT NULL,
        at_ms bigint NOT NULL,
        status_code integer,
        duration_ms integer NOT NULL,
        error text
      );
      CREATE INDEX webhook_attempts_delivery ON webhook_attempts(endpoint_id, message_id, at_ms);
      -- The outbox is written by the insert of the event itself: in its statement's transaction,
      -- whichever path wrote it (a change's CTE, AuditStore.append), so an event and its
      -- deliveries commit or roll back together, and no write path has to remember the outbox.
      CREATE FUNCTION audit_events_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO webhook_messages (id, account_id, event_type, at, data)
          SELECT NEW.id, NEW.account_id, NEW.action, NEW.at, NEW.detail
          WHERE EXISTS (SELECT 1 FROM webhook_event_types WHERE type = NEW.action)
            AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
            AND (e.event_types IS NULL OR NEW.action = ANY (string_to_array(e.event_types, ','))));
        IF FOUND THEN
          INSERT INTO webhook_deliveries (endpoint_id, message_id, status, tries, since_ms, next_at_ms, lease, updated_ms)
            SELECT e.id, NEW.id, 'pending', 0, t.ms, t.ms, NULL, t.ms
            FROM webhook_endpoints e, (SELECT (extract(epoch FROM NEW.at) * 1000)::bigint AS ms) t
            WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
              AND (e.event_types IS NULL OR NEW.action = ANY (string_to_array(e.event_types, ',')));
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER audit_events_webhooks AFTER INSERT ON audit_events
        FOR EACH ROW WHEN (NEW.account_id IS NOT NULL) EXECUTE FUNCTION audit_events_webhooks();
    `,
  },
  {
    version: 9,
    name: 'onboarding records under the parameters mark (totp/records.ts ParamsMark)',
    // Rows written from this version on follow the mark's rule: a secret issued with parameters other than
    // SHA1/6/30 carries the mark, so getOTP and verifyOTP read the record of an unmarked secret only in an
    // account that still has an older row with such parameters, which the partial index finds at once.
    sqlite: `
      ALTER TABLE onboarding ADD COLUMN params_marked INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX onboarding_unmarked_params ON onboarding (account_id)
        WHERE params_marked = 0 AND (algorithm <> 'SHA1' OR digits <> 6 OR period <> 30);
    `,
    postgres: `
      ALTER TABLE onboarding ADD COLUMN params_marked boolean NOT NULL DEFAULT false;
      CREATE INDEX onboarding_unmarked_params ON onboarding (account_id)
        WHERE NOT params_marked AND (algorithm <> 'SHA1' OR digits <> 6 OR period <> 30);
    `,
  },
  {
    version: 10,
    name: 'refused calls per account, key, region, UTC day, API group and reason (the portal overview)',
    sqlite: `
      CREATE TABLE refusals_daily (
        account_id TEXT NOT NULL,
        day TEXT NOT NULL,
        key_id TEXT NOT NULL,
        region TEXT NOT NULL,
        api_group TEXT NOT NULL,
        reason TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (account_id, day, key_id, region, api_group, reason)
      ) WITHOUT ROWID;
    `,
    postgres: `
      CREATE TABLE refusals_daily (
        account_id text NOT NULL,
        day text NOT NULL,
        key_id text NOT NULL,
        region text NOT NULL,
        api_group text NOT NULL,
        reason text NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (account_id, day, key_id, region, api_group, reason)
      );
    `,
  },
  {
    version: 11,
    name: 'conversion jobs, their documents and results in pieces, and their events in the outbox',
    // options, metadata and error_params: JSON text. sealed: the job's PDF password and URLs, sealed (never as given).
    // A running job's lease runs to lease_until_ms (epoch ms); written_bytes counts the result pieces written so far.
    sqlite: `
      INSERT INTO webhook_event_types (type) VALUES ('conversion.succeeded'), ('conversion.failed');
      CREATE TABLE conversion_jobs (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id),
        key_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
        operation TEXT NOT NULL,
        options TEXT NOT NULL,
        basename TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('upload', 'url')),
        has_result_url INTEGER NOT NULL,
        metadata TEXT,
        sealed TEXT,
        idempotency_key TEXT,
        fingerprint TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        lease TEXT,
        lease_until_ms INTEGER,
        node TEXT,
        pages_done INTEGER NOT NULL DEFAULT 0,
        pages_total INTEGER,
        written_bytes INTEGER NOT NULL DEFAULT 0,
        result_type TEXT,
        result_bytes INTEGER,
        result_name TEXT,
        result_pages INTEGER,
        result_gone INTEGER NOT NULL DEFAULT 0,
        error_code TEXT,
        error_params TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT,
        expires_at TEXT
      );
      CREATE INDEX conversion_jobs_account ON conversion_jobs(account_id, id);
      CREATE UNIQUE INDEX conversion_jobs_idempotency ON conversion_jobs(account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
      CREATE INDEX conversion_jobs_active ON conversion_jobs(status, id) WHERE status IN ('queued', 'running');
      CREATE INDEX conversion_jobs_expiry ON conversion_jobs(expires_at) WHERE result_type IS NOT NULL AND result_gone = 0;
      CREATE INDEX conversion_jobs_finished ON conversion_jobs(finished_at) WHERE finished_at IS NOT NULL;
      -- Each account's latest claim (epoch ms): among accounts with as many jobs running, the one whose turn is oldest goes first.
      CREATE TABLE conversion_job_turns (
        account_id TEXT PRIMARY KEY,
        claimed_ms INTEGER NOT NULL
      );
      CREATE TABLE conversion_job_pieces (
        job_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('document', 'result')),
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (job_id, kind, seq)
      );
    `,
    postgres: `
      INSERT INTO webhook_event_types (type) VALUES ('conversion.succeeded'), ('conversion.failed');
      CREATE TABLE conversion_jobs (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts(id),
        key_id text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
        operation text NOT NULL,
        options jsonb NOT NULL,
        basename text NOT NULL,
        source text NOT NULL CHECK (source IN ('upload', 'url')),
        has_result_url boolean NOT NULL,
        metadata jsonb,
        sealed text,
        idempotency_key text,
        fingerprint text,
        attempts integer NOT NULL DEFAULT 0,
        lease text,
        lease_until_ms bigint,
        node text,
        pages_done integer NOT NULL DEFAULT 0,
        pages_total integer,
        written_bytes bigint NOT NULL DEFAULT 0,
        result_type text,
        result_bytes bigint,
        result_name text,
        result_pages integer,
        result_gone boolean NOT NULL DEFAULT false,
        error_code text,
        error_params jsonb,
        created_at timestamptz NOT NULL,
        started_at timestamptz,
        finished_at timestamptz,
        expires_at timestamptz
      );
      CREATE INDEX conversion_jobs_account ON conversion_jobs(account_id, id COLLATE "C");
      CREATE UNIQUE INDEX conversion_jobs_idempotency ON conversion_jobs(account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
      CREATE INDEX conversion_jobs_active ON conversion_jobs(status, id COLLATE "C") WHERE status IN ('queued', 'running');
      CREATE INDEX conversion_jobs_expiry ON conversion_jobs(expires_at) WHERE result_type IS NOT NULL AND NOT result_gone;
      CREATE INDEX conversion_jobs_finished ON conversion_jobs(finished_at) WHERE finished_at IS NOT NULL;
      -- Each account's latest claim (epoch ms): among accounts with as many jobs running, the one whose turn is oldest goes first.
      CREATE TABLE conversion_job_turns (
        account_id text PRIMARY KEY,
        claimed_ms bigint NOT NULL
      );
      CREATE TABLE conversion_job_pieces (
        job_id text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('document', 'result')),
        seq integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (job_id, kind, seq)
      );
      ALTER TABLE conversion_job_pieces ALTER COLUMN data SET STORAGE EXTERNAL;
    `,
  },
  {
    version: 12,
    name: "passkeys beside TOTP factors, their single-use challenges, attempt windows, Idempotency-Key records, and each account's factor settings",
    // A factor's type; a passkey's signature counter (sign_count) and what it told of itself at registration (passkey_meta, JSON:
    // device type, backed up, transports; nothing that identifies the user). Its credential ID and public key are in sealed.
    // A challenge is kept as a keyed digest only, until used once or expired. factor_settings: an account's relying party
    // (rp_id, rp_name, origins as a JSON array) and its per-user attempt limits; a null column takes the server's default.
    sqlite: `
      ALTER TABLE totp_factors ADD COLUMN type TEXT NOT NULL DEFAULT 'totp' CHECK (type IN ('totp', 'passkey'));
      ALTER TABLE totp_factors ADD COLUMN sign_count INTEGER;
      ALTER TABLE totp_factors ADD COLUMN passkey_meta TEXT;
      -- A keyed digest of a passkey's credential ID: one credential is one factor of an account, however many register it at once.
      ALTER TABLE totp_factors ADD COLUMN credential_digest TEXT;
      CREATE UNIQUE INDEX totp_factors_credential ON totp_factors (account_id, credential_digest) WHERE credential_digest IS NOT NULL;
      CREATE TABLE passkey_challenges (
        digest TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        purpose TEXT NOT NULL CHECK (purpose IN ('registration', 'authentication')),
        user_verification TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX passkey_challenges_user ON passkey_challenges (account_id, user_id, created_at);
      CREATE INDEX passkey_challenges_expiry ON passkey_challenges (expires_at);
      -- Attempts per user or caller-supplied key in a fixed window (key: a keyed digest, never the user ID or the address given).
      CREATE TABLE attempt_windows (
        key TEXT PRIMARY KEY,
        window_start INTEGER NOT NULL,
        count INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX attempt_windows_expiry ON attempt_windows (expires_ms);
      -- An Idempotency-Key's request and its answer (sealed: an answer may carry a secret), per owner (an account, or an admin token),
      -- until expires_ms; a request under way holds it until lease_until_ms (status null).
      CREATE TABLE idempotency_records (
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER,
        sealed TEXT,
        lease_until_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, key)
      );
      CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_ms);
      CREATE TABLE factor_settings (
        account_id TEXT PRIMARY KEY REFERENCES accounts(id),
        rp_id TEXT,
        rp_name TEXT,
        origins TEXT NOT NULL DEFAULT '[]',
        user_limit INTEGER,
        key_limit INTEGER,
        limit_window_seconds INTEGER,
        updated_at TEXT NOT NULL
      );
    `,
    postgres: `
      ALTER TABLE totp_factors ADD COLUMN type text NOT NULL DEFAULT 'totp' CHECK (type IN ('totp', 'passkey'));
      ALTER TABLE totp_factors ADD COLUMN sign_count bigint;
      ALTER TABLE totp_factors ADD COLUMN passkey_meta jsonb;
      ALTER TABLE totp_factors ADD COLUMN credential_digest text;
      CREATE UNIQUE INDEX totp_factors_credential ON totp_factors (account_id, credential_digest) WHERE credential_digest IS NOT NULL;
      CREATE TABLE passkey_challenges (
        digest text PRIMARY KEY,
        account_id text NOT NULL,
        user_id text NOT NULL,
        purpose text NOT NULL CHECK (purpose IN ('registration', 'authentication')),
        user_verification text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX passkey_challenges_user ON passkey_challenges (account_id, user_id, created_at);
      CREATE INDEX passkey_challenges_expiry ON passkey_challenges (expires_at);
      -- Attempts per user or caller-supplied key in a fixed window (key: a keyed digest, never the user ID or the address given).
      CREATE TABLE attempt_windows (
        key text PRIMARY KEY,
        window_start bigint NOT NULL,
        count integer NOT NULL,
        expires_ms bigint NOT NULL
      );
      CREATE INDEX attempt_windows_expiry ON attempt_windows (expires_ms);
      CREATE TABLE idempotency_records (
        owner text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        status integer,
        sealed text,
        lease_until_ms bigint NOT NULL,
        expires_ms bigint NOT NULL,
        PRIMARY KEY (owner, key)
      );
      CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_ms);
      CREATE TABLE factor_settings (
        account_id text PRIMARY KEY REFERENCES accounts(id),
        rp_id text,
        rp_name text,
        origins jsonb NOT NULL DEFAULT '[]',
        user_limit integer,
        key_limit integer,
        limit_window_seconds integer,
        updated_at timestamptz NOT NULL
      );
    `,
  },
  {
    version: 13,
    name: "per-owner tallies of passkey challenges and Idempotency-Key records (their caps), and indexes to reclaim an owner's expired ones",
    // record_tallies: the rows (and bytes) each owner keeps of a kind of record a tenant makes by calling: an account's passkey
    // challenges (owner: the account id), an Idempotency-Key owner's records (owner: `account:…` or `admin:…`; bytes: key,
    // fingerprint and sealed answer). Kept by triggers, whichever path writes or deletes (a request, the pruner, the maintenance
    // thread), so that a cap is one read in the write's own step, never a count of the rows. PostgreSQL's triggers are per
    // statement (a prune of many rows moves each owner's tally once, owners in order, so two prunes cannot deadlock on them).
    sqlite: `
      CREATE TABLE record_tallies (
        owner TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('passkey_challenges', 'idempotency_records')),
        row_count INTEGER NOT NULL,
        byte_count INTEGER NOT NULL,
        PRIMARY KEY (owner, kind)
      ) WITHOUT ROWID;
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT account_id, 'passkey_challenges', count(*), 0 FROM passkey_challenges GROUP BY account_id;
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT owner, 'idempotency_records', count(*), sum(length(key) + length(fingerprint) + coalesce(length(sealed), 0))
        FROM idempotency_records GROUP BY owner;
      CREATE TRIGGER passkey_challenges_tally_insert AFTER INSERT ON passkey_challenges BEGIN
        INSERT INTO record_tallies (owner, kind, row_count, byte_count) VALUES (NEW.account_id, 'passkey_challenges', 1, 0)
          ON CONFLICT (owner, kind) DO UPDATE SET row_count = row_count + 1;
      END;
      CREATE TRIGGER passkey_challenges_tally_delete AFTER DELETE ON passkey_challenges BEGIN
        UPDATE record_tallies SET row_count = row_count - 1 WHERE owner = OLD.account_id AND kind = 'passkey_challenges';
      END;
      CREATE TRIGGER idempotency_records_tally_insert AFTER INSERT ON idempotency_records BEGIN
        INSERT INTO record_tallies (owner, kind, row_count, byte_count)
          VALUES (NEW.owner, 'idempotency_records', 1, length(NEW.key) + length(NEW.fingerprint) + coalesce(length(NEW.sealed), 0))
          ON CONFLICT (owner, kind) DO UPDATE SET row_count = row_count + 1, byte_count = byte_count + excluded.byte_count;
      END;
      CREATE TRIGGER idempotency_records_tally_update AFTER UPDATE ON idempotency_records BEGIN
        UPDATE record_tallies SET byte_count = byte_count - (length(OLD.key) + length(OLD.fingerprint) + coalesce(length(OLD.sealed), 0))
          WHERE owner = OLD.owner AND kind = 'idempotency_records';
        UPDATE record_tallies SET byte_count = byte_count + (length(NEW.key) + length(NEW.fingerprint) + coalesce(length(NEW.sealed), 0))
          WHERE owner = NEW.owner AND kind = 'idempotency_records';
      END;
      CREATE TRIGGER idempotency_records_tally_delete AFTER DELETE ON idempotency_records BEGIN
        UPDATE record_tallies SET row_count = row_count - 1,
          byte_count = byte_count - (length(OLD.key) + length(OLD.fingerprint) + coalesce(length(OLD.sealed), 0))
          WHERE owner = OLD.owner AND kind = 'idempotency_records';
      END;
      CREATE INDEX passkey_challenges_account ON passkey_challenges (account_id, expires_at);
      CREATE INDEX idempotency_records_owner ON idempotency_records (owner, expires_ms);
    `,
    postgres: `
      CREATE TABLE record_tallies (
        owner text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('passkey_challenges', 'idempotency_records')),
        row_count bigint NOT NULL,
        byte_count bigint NOT NULL,
        PRIMARY KEY (owner, kind)
      );
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT account_id, 'passkey_challenges', count(*), 0 FROM passkey_challenges GROUP BY account_id;
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT owner, 'idempotency_records', count(*), sum(octet_length(key) + octet_length(fingerprint) + coalesce(octet_length(sealed), 0))
        FROM idempotency_records GROUP BY owner;
      -- Each owner's change of rows and bytes in a statement's transition tables, applied in owner order.
      CREATE FUNCTION passkey_challenges_tally() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT account_id, 'passkey_challenges', count(*), 0 FROM added GROUP BY account_id ORDER BY account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        ELSE
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT account_id, 'passkey_challenges', -count(*), 0 FROM gone GROUP BY account_id ORDER BY account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER passkey_challenges_tally_insert AFTER INSERT ON passkey_challenges
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION passkey_challenges_tally();
      CREATE TRIGGER passkey_challenges_tally_delete AFTER DELETE ON passkey_challenges
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION passkey_challenges_tally();
      CREATE FUNCTION idempotency_records_tally() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT owner, 'idempotency_records', count(*), sum(octet_length(key) + octet_length(fingerprint) + coalesce(octet_length(sealed), 0))
            FROM added GROUP BY owner ORDER BY owner
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count, byte_count = t.byte_count + excluded.byte_count;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT owner, 'idempotency_records', -count(*), -sum(octet_length(key) + octet_length(fingerprint) + coalesce(octet_length(sealed), 0))
            FROM gone GROUP BY owner ORDER BY owner
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count, byte_count = t.byte_count + excluded.byte_count;
        ELSE
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT owner, 'idempotency_records', sum(n), sum(bytes) FROM (
              SELECT owner, 1 AS n, octet_length(key) + octet_length(fingerprint) + coalesce(octet_length(sealed), 0) AS bytes FROM added
              UNION ALL
              SELECT owner, -1, -(octet_length(key) + octet_length(fingerprint) + coalesce(octet_length(sealed), 0)) FROM gone
            ) d GROUP BY owner ORDER BY owner
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count, byte_count = t.byte_count + excluded.byte_count;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER idempotency_records_tally_insert AFTER INSERT ON idempotency_records
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION idempotency_records_tally();
      CREATE TRIGGER idempotency_records_tally_update AFTER UPDATE ON idempotency_records
        REFERENCING OLD TABLE AS gone NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION idempotency_records_tally();
      CREATE TRIGGER idempotency_records_tally_delete AFTER DELETE ON idempotency_records
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION idempotency_records_tally();
      CREATE INDEX passkey_challenges_account ON passkey_challenges (account_id, expires_at);
      CREATE INDEX idempotency_records_owner ON idempotency_records (owner, expires_ms);
    `,
  },
  {
    version: 14,
    name: 'per-account tally of managed factors (their cap, FACTORS_PER_ACCOUNT)',
    // A third kind of record_tallies: an account's managed factors (TOTP and passkeys, pending and active), kept by triggers
    // like the others, so that a deletion (of a factor, of its user by cascade, or a prune of expired pending ones) gives
    // its row back. SQLite cannot change a CHECK, so its table is copied; legacy_alter_table keeps the rename from
    // checking the other tables' triggers, which name record_tallies while it is away.
    sqlite: `
      CREATE TABLE record_tallies_new (
        owner TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('passkey_challenges', 'idempotency_records', 'factors')),
        row_count INTEGER NOT NULL,
        byte_count INTEGER NOT NULL,
        PRIMARY KEY (owner, kind)
      ) WITHOUT ROWID;
      INSERT INTO record_tallies_new (owner, kind, row_count, byte_count) SELECT owner, kind, row_count, byte_count FROM record_tallies;
      DROP TABLE record_tallies;
      PRAGMA legacy_alter_table = ON;
      ALTER TABLE record_tallies_new RENAME TO record_tallies;
      PRAGMA legacy_alter_table = OFF;
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT account_id, 'factors', count(*), 0 FROM totp_factors GROUP BY account_id;
      CREATE TRIGGER totp_factors_tally_insert AFTER INSERT ON totp_factors BEGIN
        INSERT INTO record_tallies (owner, kind, row_count, byte_count) VALUES (NEW.account_id, 'factors', 1, 0)
          ON CONFLICT (owner, kind) DO UPDATE SET row_count = row_count + 1;
      END;
      CREATE TRIGGER totp_factors_tally_delete AFTER DELETE ON totp_factors BEGIN
        UPDATE record_tallies SET row_count = row_count - 1 WHERE owner = OLD.account_id AND kind = 'factors';
      END;
    `,
    postgres: `
      ALTER TABLE record_tallies DROP CONSTRAINT record_tallies_kind_check;
      ALTER TABLE record_tallies ADD CONSTRAINT record_tallies_kind_check CHECK (kind IN ('passkey_challenges', 'idempotency_records', 'factors'));
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT account_id, 'factors', count(*), 0 FROM totp_factors GROUP BY account_id;
      CREATE FUNCTION totp_factors_tally() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT account_id, 'factors', count(*), 0 FROM added GROUP BY account_id ORDER BY account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        ELSE
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT account_id, 'factors', -count(*), 0 FROM gone GROUP BY account_id ORDER BY account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER totp_factors_tally_insert AFTER INSERT ON totp_factors
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION totp_factors_tally();
      CREATE TRIGGER totp_factors_tally_delete AFTER DELETE ON totp_factors
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION totp_factors_tally();
    `,
  },
  {
    version: 15,
    name: 'per-account tally of pending webhook deliveries and its cap (WEBHOOK_PENDING_PER_ACCOUNT): past it, deliveries are dropped and counted',
    // Two more kinds of record_tallies: an account's pending webhook deliveries (kept by triggers on webhook_deliveries, as a
    // delivery comes, leaves pending or goes) and the deliveries dropped for it and not yet taken by a node's worker (which
    // counts them in tessera_webhook_deliveries_dropped_total and logs them). The outbox trigger on audit_events decides in the
    // event's own insert: it writes as many of the event's deliveries as the account has room for (endpoints in id order), the
    // message only with one, and counts the rest as dropped; the event itself is kept. The cap is in store_settings, set by each
    // server as it starts (its WEBHOOK_PENDING_PER_ACCOUNT), since a trigger cannot read the configuration. A partial index
    // finds the dropped counts not yet taken, so that a worker's poll for them is a read of nothing when there are none.
    sqlite: `
      CREATE TABLE store_settings (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO store_settings (name, value) VALUES ('webhook_pending_per_account', 100000);
      CREATE TABLE record_tallies_new (
        owner TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('passkey_challenges', 'idempotency_records', 'factors', 'webhook_pending', 'webhook_dropped')),
        row_count INTEGER NOT NULL,
        byte_count INTEGER NOT NULL,
        PRIMARY KEY (owner, kind)
      ) WITHOUT ROWID;
      INSERT INTO record_tallies_new (owner, kind, row_count, byte_count) SELECT owner, kind, row_count, byte_count FROM record_tallies;
      DROP TABLE record_tallies;
      PRAGMA legacy_alter_table = ON;
      ALTER TABLE record_tallies_new RENAME TO record_tallies;
      PRAGMA legacy_alter_table = OFF;
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT e.account_id, 'webhook_pending', count(*), 0 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status = 'pending' GROUP BY e.account_id;
      CREATE TRIGGER webhook_deliveries_tally_insert AFTER INSERT ON webhook_deliveries WHEN NEW.status = 'pending' BEGIN
        INSERT INTO record_tallies (owner, kind, row_count, byte_count)
          SELECT account_id, 'webhook_pending', 1, 0 FROM webhook_endpoints WHERE id = NEW.endpoint_id
          ON CONFLICT (owner, kind) DO UPDATE SET row_count = row_count + 1;
      END;
      CREATE TRIGGER webhook_deliveries_tally_update AFTER UPDATE OF status ON webhook_deliveries
        WHEN (OLD.status = 'pending') <> (NEW.status = 'pending') BEGIN
        UPDATE record_tallies SET row_count = row_count + CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END
          WHERE owner = (SELECT account_id FROM webhook_endpoints WHERE id = NEW.endpoint_id) AND kind = 'webhook_pending';
      END;
      CREATE TRIGGER webhook_deliveries_tally_delete AFTER DELETE ON webhook_deliveries WHEN OLD.status = 'pending' BEGIN
        UPDATE record_tallies SET row_count = row_count - 1
          WHERE owner = (SELECT account_id FROM webhook_endpoints WHERE id = OLD.endpoint_id) AND kind = 'webhook_pending';
      END;
      CREATE INDEX record_tallies_dropped ON record_tallies (owner) WHERE kind = 'webhook_dropped' AND row_count > 0;
      DROP TRIGGER audit_events_webhooks;
      CREATE TRIGGER audit_events_webhooks AFTER INSERT ON audit_events
        WHEN NEW.account_id IS NOT NULL AND NEW.action IN (SELECT type FROM webhook_event_types)
          AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
            AND (e.event_types IS NULL OR instr(',' || e.event_types || ',', ',' || NEW.action || ',') > 0))
      BEGIN
        INSERT INTO webhook_messages (id, account_id, event_type, at, data) SELECT NEW.id, NEW.account_id, NEW.action, NEW.at, NEW.detail
          WHERE (coalesce((SELECT value FROM store_settings WHERE name = 'webhook_pending_per_account'), 9223372036854775807) - coalesce((SELECT row_count FROM record_tallies WHERE owner = NEW.account_id AND kind = 'webhook_pending'), 0)) > 0;
        INSERT INTO webhook_deliveries (endpoint_id, message_id, status, tries, since_ms, next_at_ms, lease, updated_ms)
          SELECT e.id, NEW.id, 'pending', 0, t.ms, t.ms, NULL, t.ms
          FROM webhook_endpoints e, (SELECT CAST(round((julianday(NEW.at) - 2440587.5) * 86400000) AS INTEGER) AS ms) t
          WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
            AND (e.event_types IS NULL OR instr(',' || e.event_types || ',', ',' || NEW.action || ',') > 0)
          ORDER BY e.id LIMIT max((coalesce((SELECT value FROM store_settings WHERE name = 'webhook_pending_per_account'), 9223372036854775807) - coalesce((SELECT row_count FROM record_tallies WHERE owner = NEW.account_id AND kind = 'webhook_pending'), 0)), 0);
        INSERT INTO record_tallies (owner, kind, row_count, byte_count)
          SELECT NEW.account_id, 'webhook_dropped', n, 0 FROM (SELECT
            (SELECT count(*) FROM webhook_endpoints e WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
            AND (e.event_types IS NULL OR instr(',' || e.event_types || ',', ',' || NEW.action || ',') > 0))
            - (SELECT count(*) FROM webhook_deliveries WHERE message_id = NEW.id) AS n)
          WHERE n > 0
          ON CONFLICT (owner, kind) DO UPDATE SET row_count = row_count + excluded.row_count;
      END;
    `,
    postgres: `
      CREATE TABLE store_settings (name text PRIMARY KEY, value bigint NOT NULL);
      INSERT INTO store_settings (name, value) VALUES ('webhook_pending_per_account', 100000);
      ALTER TABLE record_tallies DROP CONSTRAINT record_tallies_kind_check;
      ALTER TABLE record_tallies ADD CONSTRAINT record_tallies_kind_check
        CHECK (kind IN ('passkey_challenges', 'idempotency_records', 'factors', 'webhook_pending', 'webhook_dropped'));
      INSERT INTO record_tallies (owner, kind, row_count, byte_count)
        SELECT e.account_id, 'webhook_pending', count(*), 0 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status = 'pending' GROUP BY e.account_id;
      CREATE INDEX record_tallies_dropped ON record_tallies (owner) WHERE kind = 'webhook_dropped' AND row_count > 0;
      -- Each account's change of pending deliveries in a statement's transition tables, applied in account order; a statement
      -- that changes no delivery's pending-ness (a claim, a prune of finished ones) touches no tally.
      CREATE FUNCTION webhook_deliveries_tally() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT e.account_id, 'webhook_pending', count(*), 0 FROM added d JOIN webhook_endpoints e ON e.id = d.endpoint_id
            WHERE d.status = 'pending' GROUP BY e.account_id ORDER BY e.account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT e.account_id, 'webhook_pending', -count(*), 0 FROM gone d JOIN webhook_endpoints e ON e.id = d.endpoint_id
            WHERE d.status = 'pending' GROUP BY e.account_id ORDER BY e.account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        ELSE
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count)
            SELECT account_id, 'webhook_pending', sum(n), 0 FROM (
              SELECT e.account_id, 1 AS n FROM added d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.status = 'pending'
              UNION ALL
              SELECT e.account_id, -1 FROM gone d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.status = 'pending'
            ) c GROUP BY account_id HAVING sum(n) <> 0 ORDER BY account_id
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER webhook_deliveries_tally_insert AFTER INSERT ON webhook_deliveries
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_tally();
      CREATE TRIGGER webhook_deliveries_tally_update AFTER UPDATE ON webhook_deliveries
        REFERENCING OLD TABLE AS gone NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_tally();
      CREATE TRIGGER webhook_deliveries_tally_delete AFTER DELETE ON webhook_deliveries
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_tally();
      -- The account's pending tally row is taken first (locked until the event's transaction ends, so parallel events of one
      -- account queue there and each sees the one before's deliveries); then as many deliveries as there is room for.
      CREATE OR REPLACE FUNCTION audit_events_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        wanted bigint;
        pending bigint;
        room bigint;
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM webhook_event_types WHERE type = NEW.action) THEN
          RETURN NULL;
        END IF;
        SELECT count(*) INTO wanted FROM webhook_endpoints e WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
          AND (e.event_types IS NULL OR NEW.action = ANY (string_to_array(e.event_types, ',')));
        IF wanted = 0 THEN
          RETURN NULL;
        END IF;
        INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count) VALUES (NEW.account_id, 'webhook_pending', 0, 0)
          ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count RETURNING t.row_count INTO pending;
        room := least(wanted, greatest(coalesce((SELECT value FROM store_settings WHERE name = 'webhook_pending_per_account'), wanted + pending) - pending, 0));
        IF room > 0 THEN
          INSERT INTO webhook_messages (id, account_id, event_type, at, data) VALUES (NEW.id, NEW.account_id, NEW.action, NEW.at, NEW.detail);
          INSERT INTO webhook_deliveries (endpoint_id, message_id, status, tries, since_ms, next_at_ms, lease, updated_ms)
            SELECT e.id, NEW.id, 'pending', 0, t.ms, t.ms, NULL, t.ms
            FROM webhook_endpoints e, (SELECT (extract(epoch FROM NEW.at) * 1000)::bigint AS ms) t
            WHERE e.account_id = NEW.account_id AND e.disabled_at IS NULL
              AND (e.event_types IS NULL OR NEW.action = ANY (string_to_array(e.event_types, ',')))
            ORDER BY e.id LIMIT room;
        END IF;
        IF wanted > room THEN
          INSERT INTO record_tallies AS t (owner, kind, row_count, byte_count) VALUES (NEW.account_id, 'webhook_dropped', wanted - room, 0)
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = t.row_count + excluded.row_count;
        END IF;
        RETURN NULL;
      END $$;
    `,
  },
  {
    version: 16,
    name: "an index of each account's deleted webhook endpoints, oldest last, for the prune past WEBHOOK_DELETED_KEPT_PER_ACCOUNT",
    // The prune (in a deletion's own step) reads the account's deleted endpoints newest first past the number kept; the
    // index of endpoints covers the ones not deleted only, so without this it read every account's endpoints.
    sqlite: `
      CREATE INDEX webhook_endpoints_deleted ON webhook_endpoints(account_id, disabled_at DESC, id DESC) WHERE disabled_at IS NOT NULL;
    `,
    postgres: `
      CREATE INDEX webhook_endpoints_deleted ON webhook_endpoints(account_id, disabled_at DESC, id COLLATE "C" DESC) WHERE disabled_at IS NOT NULL;
    `,
  },
  {
    version: 17,
    name: "the W3C traceparent of what caused an audit event (its webhook deliveries' traces follow it) and of a job's submission (its run's trace)",
    // Null when the node did not trace. An audit event's is written from its detail's TRACE_KEY (stamps.ts), never changed after.
    sqlite: `
      ALTER TABLE audit_events ADD COLUMN trace_parent TEXT;
      ALTER TABLE conversion_jobs ADD COLUMN trace_parent TEXT;
    `,
    postgres: `
      ALTER TABLE audit_events ADD COLUMN trace_parent text;
      ALTER TABLE conversion_jobs ADD COLUMN trace_parent text;
    `,
  },
  {
    version: 18,
    name: 'single sign-on: OpenID Connect providers, the identities bound to users, authorization requests in flight, and how a session was signed in',
    // Identities are keyed by (provider, subject), the only stable name a provider gives (OpenID Connect Core 5.7);
    // the address beside it is what the provider last said, never a key. Requests are kept by a hash of their state.
    sqlite: `
      CREATE TABLE sso_providers (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        issuer TEXT NOT NULL,
        client_id TEXT NOT NULL,
        client_secret TEXT,
        domains TEXT NOT NULL,
        join_account_id TEXT REFERENCES accounts(id),
        join_role TEXT CHECK (join_role IN ('owner', 'admin', 'developer', 'viewer')),
        mfa TEXT NOT NULL CHECK (mfa IN ('portal', 'amr', 'provider')),
        password_allowed INTEGER NOT NULL CHECK (password_allowed IN (0, 1)),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE sso_identities (
        provider_id TEXT NOT NULL REFERENCES sso_providers(id),
        subject TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES users(id),
        email TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_used_at TEXT NOT NULL,
        PRIMARY KEY (provider_id, subject)
      );
      CREATE UNIQUE INDEX sso_identities_user ON sso_identities(user_id, provider_id);
      CREATE TABLE sso_requests (
        state_hash TEXT PRIMARY KEY,
        provider_id TEXT NOT NULL REFERENCES sso_providers(id),
        browser_hash TEXT NOT NULL,
        nonce TEXT NOT NULL,
        verifier TEXT NOT NULL,
        next TEXT NOT NULL,
        link_user_id TEXT REFERENCES users(id),
        ip TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX sso_requests_ip ON sso_requests(ip, expires_at);
      CREATE INDEX sso_requests_expires ON sso_requests(expires_at);
      ALTER TABLE sessions ADD COLUMN sso_provider_id TEXT;
    `,
    postgres: `
      CREATE TABLE sso_providers (
        id text PRIMARY KEY,
        name text NOT NULL,
        issuer text NOT NULL,
        client_id text NOT NULL,
        client_secret text,
        domains text NOT NULL,
        join_account_id text REFERENCES accounts(id),
        join_role text CHECK (join_role IN ('owner', 'admin', 'developer', 'viewer')),
        mfa text NOT NULL CHECK (mfa IN ('portal', 'amr', 'provider')),
        password_allowed boolean NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE TABLE sso_identities (
        provider_id text NOT NULL REFERENCES sso_providers(id),
        subject text NOT NULL,
        user_id text NOT NULL REFERENCES users(id),
        email text NOT NULL,
        created_at timestamptz NOT NULL,
        last_used_at timestamptz NOT NULL,
        PRIMARY KEY (provider_id, subject)
      );
      CREATE UNIQUE INDEX sso_identities_user ON sso_identities(user_id, provider_id);
      CREATE TABLE sso_requests (
        state_hash text PRIMARY KEY,
        provider_id text NOT NULL REFERENCES sso_providers(id),
        browser_hash text NOT NULL,
        nonce text NOT NULL,
        verifier text NOT NULL,
        next text NOT NULL,
        link_user_id text REFERENCES users(id),
        ip text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX sso_requests_ip ON sso_requests(ip, expires_at);
      CREATE INDEX sso_requests_expires ON sso_requests(expires_at);
      ALTER TABLE sessions ADD COLUMN sso_provider_id text;
    `,
  },
]
