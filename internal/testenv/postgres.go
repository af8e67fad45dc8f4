package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresURL is the server tests create their databases on:
// OUTPRINT_TEST_POSTGRES_URL, or the machine's PostgreSQL on 127.0.0.1:5432
// with trust authentication.
func PostgresURL() string {
	if u := os.Getenv("OUTPRINT_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// PostgresDatabase creates a fresh, empty database named prefix_<random>
// on PostgresURL and returns its URL; it is dropped when the test ends, so
// parallel packages never share one. A server that cannot be reached fails
// the test under CI and skips it elsewhere.
func PostgresDatabase(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	base := PostgresURL()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		Missing(t, fmt.Sprintf("PostgreSQL at %s: %v", redact(base), err))
		return ""
	}
	// Close only says goodbye to the server; one that fails leaves
	// nothing behind that the server does not end itself.
	defer func() { _ = conn.Close(ctx) }()
	var rnd [6]byte
	rand.Read(rnd[:])
	name := prefix + "_" + hex.EncodeToString(rnd[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer func() { _ = c.Close(ctx) }() // as conn's above
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// redact hides a password in a database URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
