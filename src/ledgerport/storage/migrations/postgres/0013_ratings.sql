-- Ratings of apps by business users: 1 to 5 stars and an optional review, one per user and app
-- (a user rates again by editing theirs).
CREATE TABLE app_ratings (
    app_id TEXT NOT NULL REFERENCES apps (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    stars INTEGER NOT NULL CHECK (stars BETWEEN 1 AND 5),
    review TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (app_id, user_id)
);
