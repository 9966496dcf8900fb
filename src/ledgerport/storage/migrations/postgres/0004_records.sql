-- The business records the data API serves, one table for every area, and the idempotency keys
-- of its writes.

-- A record is a document of its kind (customer, invoice, payment, ...): the fields the API
-- answers are in data (JSON, money as decimal strings); the columns are what is looked up,
-- paged or kept unique. Ids are per business (another business's id is not found).
CREATE TABLE records (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    business_id TEXT NOT NULL REFERENCES businesses (id),
    kind TEXT NOT NULL,
    number TEXT,
    data TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    deleted_at DOUBLE PRECISION,
    due_on TEXT,
    UNIQUE (business_id, kind, number)
);
CREATE INDEX records_business_kind_seq ON records (business_id, kind, seq);
-- due_on: the due date of a sent invoice not yet overdue, paid or void, which the scheduler
-- watches to mark it overdue; NULL otherwise, so the index holds only the invoices to watch.
CREATE INDEX records_due ON records (due_on) WHERE due_on IS NOT NULL;

-- Which records a record refers to where the reference keeps the other from being deleted (a
-- journal entry's accounts: an account once posted to is archived, never deleted).
CREATE TABLE record_references (
    business_id TEXT NOT NULL REFERENCES businesses (id),
    referenced_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    PRIMARY KEY (referenced_id, record_id)
);

-- Invoices of the first data endpoint move into records.
INSERT INTO records (id, business_id, kind, number, data, created_at, updated_at)
    SELECT id, business_id, 'invoice', number,
        (data::jsonb || jsonb_build_object('id', id, 'number', number, 'customerId', customer_id,
            'status', status, 'currency', currency, 'total', total))::text,
        created_at, created_at
    FROM invoices ORDER BY seq;
DROP TABLE invoices;

-- The next number of each numbered kind (INV-0001, PUR-0001, ...) per business.
CREATE TABLE record_numbers (
    business_id TEXT NOT NULL REFERENCES businesses (id),
    kind TEXT NOT NULL,
    last INTEGER NOT NULL,
    PRIMARY KEY (business_id, kind)
);

-- What a business invoiced in a calendar year, for the plan's invoice ceiling.
CREATE TABLE invoice_years (
    business_id TEXT NOT NULL REFERENCES businesses (id),
    year INTEGER NOT NULL,
    invoices INTEGER NOT NULL,
    turnover_cents BIGINT NOT NULL,
    PRIMARY KEY (business_id, year)
);

-- A write's Idempotency-Key, per app and business: the request's fingerprint and the answer it
-- got, kept 24 hours so a retry replays the answer instead of writing twice.
CREATE TABLE idempotency_keys (
    app_id TEXT NOT NULL REFERENCES apps (id),
    business_id TEXT NOT NULL REFERENCES businesses (id),
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (app_id, business_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
