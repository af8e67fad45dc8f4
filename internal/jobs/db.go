package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	// The pure-Go SQLite driver, registered as "sqlite" for database/sql;
	// riversqlite works on any database/sql SQLite pool.
	_ "modernc.org/sqlite"
)

// DefaultDatabaseURL is the embedded default of SPEC §6.
const DefaultDatabaseURL = "sqlite://./outprint-data/outprint.db"

// dialect says which SQL engine a DB talks to. The SQL of this package is
// written once, in the subset both engines understand ($1 placeholders,
// RETURNING, ON CONFLICT); only the table definitions and the time encoding
// differ.
type dialect int

const (
	dialectSQLite dialect = iota + 1
	dialectPostgres
)

// DB is an open job database: SQLite (one connection, WAL) or PostgreSQL (a
// pgx pool). Open it once per process and Close it after the Service
// stopped.
type DB struct {
	dialect dialect
	// sqlite is set for SQLite: a database/sql pool limited to one
	// connection, because SQLite allows one writer and River's parallel
	// maintenance otherwise runs into SQLITE_BUSY.
	sqlite *sql.DB
	// pg is set for PostgreSQL.
	pg *pgxpool.Pool
	// where names the database for error messages, without credentials.
	where string
}

// Open connects to databaseURL: "sqlite://PATH" (PATH relative to the
// working folder, or "sqlite:///abs/path.db") or "postgres://…" /
// "postgresql://…" in libpq URL form. For SQLite the folder is created when
// missing. Open does not migrate; call Migrate.
func Open(ctx context.Context, databaseURL string) (*DB, error) {
	switch {
	case strings.HasPrefix(databaseURL, "sqlite://"):
		return openSQLite(ctx, strings.TrimPrefix(databaseURL, "sqlite://"))
	case strings.HasPrefix(databaseURL, "postgres://"), strings.HasPrefix(databaseURL, "postgresql://"):
		return openPostgres(ctx, databaseURL)
	default:
		return nil, fmt.Errorf("database %q: want sqlite://PATH or postgres://…", redact(databaseURL))
	}
}

func openSQLite(ctx context.Context, path string) (*DB, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("database sqlite://%s: want sqlite://PATH with a plain file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("database sqlite://%s: %w", path, err)
	}
	// WAL lets readers run beside the writer. synchronous(NORMAL) makes a
	// commit survive a crash of the process but leaves the log's sync to
	// the next checkpoint; acceptance commits switch to FULL (beginSQLite),
	// whose sync also covers every commit before it in the log, so an
	// accepted job survives a power loss while the worker's many small
	// state changes do not each pay a sync. (A state change lost to a power
	// loss is redone: River re-runs the job and the stored result is
	// reused.) busy_timeout covers a second process (outprint migrate)
	// touching the file; immediate transactions take the write lock at BEGIN
	// and so never fail half-way on a lock upgrade.
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("database sqlite://%s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("database sqlite://%s: %w", path, err)
	}
	return &DB{dialect: dialectSQLite, sqlite: db, where: "sqlite://" + path}, nil
}

// beginSQLite opens a transaction on the one SQLite connection. A durable
// transaction pins the connection, raises synchronous to FULL for its
// commit and lowers it again afterwards, so that no other statement runs in
// between (the pool has only this connection).
func (db *DB) beginSQLite(ctx context.Context, durable bool) (*sql.Tx, querier, func(context.Context) error, func(context.Context), error) {
	if !durable {
		tx, err := db.sqlite.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		return tx, sqlQuerier{tx}, func(context.Context) error { return tx.Commit() }, func(context.Context) { _ = tx.Rollback() }, nil
	}
	conn, err := db.sqlite.Conn(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	release := func() {
		// Back to NORMAL even when ctx is done; a connection that
		// cannot be reset is dropped from the pool.
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous = NORMAL"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	commit := func(context.Context) error {
		err := tx.Commit()
		release()
		return err
	}
	rollback := func(context.Context) {
		_ = tx.Rollback()
		release()
	}
	return tx, sqlQuerier{tx}, commit, rollback, nil
}

// minPostgresConns is the pool size when the URL does not set
// pool_max_conns: River holds one connection for LISTEN, its producer and
// leader elector take others, and acceptance should not queue behind them.
const minPostgresConns = 16

func openPostgres(ctx context.Context, databaseURL string) (*DB, error) {
	where := redact(databaseURL)
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", where, err)
	}
	if !strings.Contains(databaseURL, "pool_max_conns") && cfg.MaxConns < minPostgresConns {
		cfg.MaxConns = minPostgresConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s: %w", where, err)
	}
	return &DB{dialect: dialectPostgres, pg: pool, where: where}, nil
}

// redact removes the password from a database URL for messages.
func redact(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// String names the database without credentials.
func (db *DB) String() string { return db.where }

// Ping checks that the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error {
	var err error
	if db.dialect == dialectSQLite {
		err = db.sqlite.PingContext(ctx)
	} else {
		err = db.pg.Ping(ctx)
	}
	if err != nil {
		return fmt.Errorf("ping %s: %w", db.where, err)
	}
	return nil
}

// Close closes the pool. Stop the Service first.
func (db *DB) Close() error {
	if db.dialect == dialectSQLite {
		return db.sqlite.Close()
	}
	db.pg.Close()
	return nil
}

// querier runs this package's own SQL on a pool or inside a transaction,
// whichever the engine. Times go in as time.Time and come out through
// *time.Time or **time.Time (NULL); the SQLite side stores them as
// fixed-width UTC text so that comparisons in SQL order them correctly.
type querier interface {
	exec(ctx context.Context, query string, args ...any) (int64, error)
	queryRow(ctx context.Context, query string, args ...any) row
	query(ctx context.Context, query string, args ...any) (rows, error)
}

type row interface{ Scan(dest ...any) error }

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// errNoRows is what both engines' "no row" errors are mapped to.
var errNoRows = errors.New("no rows")

func (db *DB) pool() querier {
	if db.dialect == dialectSQLite {
		return sqlQuerier{db.sqlite}
	}
	return pgxQuerier{db.pg}
}

// --- PostgreSQL (pgx) ---

type pgxExec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type pgxQuerier struct{ x pgxExec }

func (q pgxQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.x.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) queryRow(ctx context.Context, query string, args ...any) row {
	return pgxRow{q.x.QueryRow(ctx, query, args...)}
}

func (q pgxQuerier) query(ctx context.Context, query string, args ...any) (rows, error) {
	r, err := q.x.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

type pgxRow struct{ r pgx.Row }

func (r pgxRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoRows
	}
	return err
}

// --- SQLite (database/sql) ---

type sqlExec interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type sqlQuerier struct{ x sqlExec }

// sqliteTime is the text form of times in SQLite: UTC, microseconds, fixed
// width, so that string comparison is time comparison.
const sqliteTime = "2006-01-02T15:04:05.000000Z"

func sqliteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = v.UTC().Format(sqliteTime)
		case *time.Time:
			if v == nil {
				out[i] = nil
			} else {
				out[i] = v.UTC().Format(sqliteTime)
			}
		default:
			out[i] = a
		}
	}
	return out
}

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.x.ExecContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) queryRow(ctx context.Context, query string, args ...any) row {
	return sqlRow{q.x.QueryRowContext(ctx, query, sqliteArgs(args)...)}
}

func (q sqlQuerier) query(ctx context.Context, query string, args ...any) (rows, error) {
	r, err := q.x.QueryContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

type sqlRow struct{ r *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := scanSQLite(r.r.Scan, dest)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	}
	return err
}

type sqlRows struct{ r *sql.Rows }

func (r sqlRows) Next() bool             { return r.r.Next() }
func (r sqlRows) Err() error             { return r.r.Err() }
func (r sqlRows) Close()                 { _ = r.r.Close() }
func (r sqlRows) Scan(dest ...any) error { return scanSQLite(r.r.Scan, dest) }

// scanSQLite scans through text stand-ins for the time destinations and
// parses them afterwards.
func scanSQLite(scan func(...any) error, dest []any) error {
	type fix struct {
		s   *sql.NullString
		t   *time.Time
		pt  **time.Time
		idx int
	}
	var fixes []fix
	args := make([]any, len(dest))
	for i, d := range dest {
		switch v := d.(type) {
		case *time.Time:
			s := new(sql.NullString)
			args[i] = s
			fixes = append(fixes, fix{s: s, t: v, idx: i})
		case **time.Time:
			s := new(sql.NullString)
			args[i] = s
			fixes = append(fixes, fix{s: s, pt: v, idx: i})
		default:
			args[i] = d
		}
	}
	if err := scan(args...); err != nil {
		return err
	}
	for _, f := range fixes {
		if !f.s.Valid {
			if f.pt != nil {
				*f.pt = nil
				continue
			}
			return fmt.Errorf("column %d: NULL time", f.idx)
		}
		t, err := time.Parse(sqliteTime, f.s.String)
		if err != nil {
			return fmt.Errorf("column %d: %w", f.idx, err)
		}
		if f.pt != nil {
			*f.pt = &t
		} else {
			*f.t = t
		}
	}
	return nil
}
