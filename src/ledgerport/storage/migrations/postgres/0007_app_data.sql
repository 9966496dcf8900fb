-- App data: the typed fields an app declares per resource type (developer console), and the
-- values it writes on the records of the businesses it is installed in (data API).

-- A field: key is unique per app and resource type; type is TEXT, NUMBER, BOOLEAN, DATE or
-- CHOICE; choices is a JSON array of the options of a CHOICE field (NULL for the other types);
-- name is the optional display name.
CREATE TABLE app_data_fields (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    resource_type TEXT NOT NULL,
    key TEXT NOT NULL,
    type TEXT NOT NULL,
    choices TEXT,
    name TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    UNIQUE (app_id, resource_type, key)
);

-- A value: one per app, business, record and key (a write replaces it). value is JSON: a string
-- (TEXT, DATE, CHOICE, and NUMBER as a decimal string, never a float) or a boolean.
CREATE TABLE app_data_values (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    business_id TEXT NOT NULL REFERENCES businesses (id),
    resource_type TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    UNIQUE (app_id, business_id, resource_type, resource_id, key)
);
-- GET /app-data reads an app's values in a business by resource ids, whatever their type.
CREATE INDEX app_data_values_resource ON app_data_values (app_id, business_id, resource_id);
-- Deleting a field deletes its values in every business.
CREATE INDEX app_data_values_field ON app_data_values (app_id, resource_type, key);
