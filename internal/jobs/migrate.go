package jobs

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// migrationFS holds this package's own tables, one folder per engine. Files
// are named NNN_name.sql and applied in order, each in its own transaction,
// and recorded in outprint_migration.
//
//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFS embed.FS

// Migrate brings the database up to date: River's tables (through
// rivermigrate) and then outprint's own. It is what `outprint migrate` runs,
// and what `outprint serve` runs at start for SQLite. Running it again is a
// no-op.
func Migrate(ctx context.Context, db *DB) error {
	if err := migrateRiver(ctx, db); err != nil {
		return fmt.Errorf("migrate %s: river: %w", db, err)
	}
	if err := migrateOwn(ctx, db); err != nil {
		return fmt.Errorf("migrate %s: %w", db, err)
	}
	return nil
}

func migrateRiver(ctx context.Context, db *DB) error {
	if db.dialect == dialectSQLite {
		m, err := rivermigrate.New(riversqlite.New(db.sqlite), nil)
		if err != nil {
			return err
		}
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(db.pg), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

type migration struct {
	version int
	name    string
	sql     string
}

func ownMigrations(d dialect) ([]migration, error) {
	dir := "migrations/postgres"
	if d == dialectSQLite {
		dir = "migrations/sqlite"
	}
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(migrationFS, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	// Two files of one version (branches that each added "their" next
	// migration) would apply only one of them, silently.
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

func migrateOwn(ctx context.Context, db *DB) error {
	ms, err := ownMigrations(db.dialect)
	if err != nil {
		return err
	}
	const create = `CREATE TABLE IF NOT EXISTS outprint_migration (
		version integer PRIMARY KEY,
		name text NOT NULL,
		applied_at text NOT NULL)`
	if _, err := db.pool().exec(ctx, create); err != nil {
		return fmt.Errorf("create outprint_migration: %w", err)
	}
	for _, m := range ms {
		err := db.inTx(ctx, func(q querier) error {
			if db.dialect == dialectPostgres {
				// Two processes migrating at once apply each step once.
				if _, err := q.exec(ctx, `SELECT pg_advisory_xact_lock(7234001)`); err != nil {
					return err
				}
			}
			var n int
			if err := q.queryRow(ctx, `SELECT count(*) FROM outprint_migration WHERE version = $1`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			for _, stmt := range splitStatements(m.sql) {
				if _, err := q.exec(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", firstLine(stmt), err)
				}
			}
			_, err := q.exec(ctx, `INSERT INTO outprint_migration (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, time.Now().UTC().Format(time.RFC3339))
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %03d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

// splitStatements splits a migration at semicolons that end a line. The
// migrations hold plain DDL without semicolons inside strings or bodies.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			if s := strings.TrimSpace(cur.String()); s != ";" {
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// inTx runs fn in a transaction on the pool, committing when fn returns nil.
func (db *DB) inTx(ctx context.Context, fn func(q querier) error) error {
	if db.dialect == dialectSQLite {
		tx, err := db.sqlite.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(sqlQuerier{tx}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	tx, err := db.pg.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(pgxQuerier{tx}); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}
