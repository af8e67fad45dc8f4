package service

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/store"
)

// OpenStore opens the artifact store the configuration names: the data
// folder by default, a file:// folder, or an S3 bucket whose credentials
// come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (never from the
// configuration file). The S3 store is returned as *store.S3 too, for
// Migrate's bucket creation; it is nil for a folder.
func OpenStore(cfg *config.Config) (jobs.Store, *store.S3, error) {
	if cfg.Store == "" {
		st, err := store.NewFS(dataDir(cfg))
		return st, nil, err
	}
	loc, err := store.ParseLocation(cfg.Store)
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	if loc.Scheme == "file" {
		st, err := store.NewFS(loc.Path)
		return st, nil, err
	}
	st, err := store.NewS3(store.S3Config{
		Location:        loc,
		AccessKeyID:     os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
	})
	if err != nil {
		return nil, nil, err
	}
	return st, st, nil
}

// ensureBucket creates the S3 store's bucket when the configuration names
// one (Migrate), so a fresh deployment needs no other tool.
func ensureBucket(ctx context.Context, cfg *config.Config) (string, error) {
	_, s3, err := OpenStore(cfg)
	if err != nil || s3 == nil {
		return "", err
	}
	if err := s3.EnsureBucket(ctx); err != nil {
		return "", err
	}
	return cfg.Store, nil
}

// migrateTimeout bounds Migrate: a database that does not answer ends it
// with an error instead of a hang.
const migrateTimeout = 5 * time.Minute

// Migrated says what Migrate brought up to date.
type Migrated struct {
	// Database is the job database, as jobs.DB prints it (no password).
	Database string
	// Store is the S3 store whose bucket now exists; empty for a folder.
	Store string
}

// Migrate is `outprint migrate`: it brings the job database named by
// cfg.Database up to date, SQLite or PostgreSQL, and creates the S3
// store's bucket when cfg names one. serve migrates SQLite by itself at
// start; PostgreSQL, shared by every replica, is migrated by this, once
// per deployment. Running it again changes nothing.
func Migrate(ctx context.Context, cfg *config.Config) (Migrated, error) {
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	db, err := jobs.Open(ctx, databaseURL(cfg))
	if err != nil {
		return Migrated{}, err
	}
	defer func() { _ = db.Close() }() // Migrate's result is what counts; nothing is written after it
	if err := jobs.Migrate(ctx, db); err != nil {
		return Migrated{}, fmt.Errorf("%s: %w", db, err)
	}
	done := Migrated{Database: db.String()}
	bucket, err := ensureBucket(ctx, cfg)
	if err != nil {
		return done, fmt.Errorf("store: %w", err)
	}
	done.Store = bucket
	return done, nil
}
