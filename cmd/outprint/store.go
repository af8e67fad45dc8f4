package main

import (
	"context"
	"fmt"
	"os"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/store"
)

// openStore opens the artifact store the configuration names: the data
// folder by default, a file:// folder, or an S3 bucket whose credentials
// come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (never from the
// configuration file). The S3 store is returned as *store.S3 too, for
// migrate's bucket creation; it is nil for a folder.
func openStore(cfg *config.Config) (jobs.Store, *store.S3, error) {
	if cfg.Store == "" {
		st, err := store.NewFS(cfg.DataDir)
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
// one (outprint migrate), so a fresh deployment needs no other tool.
func ensureBucket(ctx context.Context, cfg *config.Config) (string, error) {
	_, s3, err := openStore(cfg)
	if err != nil || s3 == nil {
		return "", err
	}
	if err := s3.EnsureBucket(ctx); err != nil {
		return "", err
	}
	return cfg.Store, nil
}
