package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
)

// testDatabase returns the URL of a fresh, empty database of kind, dropped
// when the test ends.
func testDatabase(t *testing.T, kind, dataDir string) string {
	t.Helper()
	if kind == "sqlite" {
		return "sqlite://" + filepath.Join(dataDir, "outprint.db")
	}
	return testenv.PostgresDatabase(t, "outprint_cmd")
}

// runWithEnv runs the outprint binary with extra environment variables.
func runWithEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestMigrateCommand: `outprint migrate` creates the job tables on both
// databases and changes nothing the second time; a database it cannot
// reach is an error, a malformed one a configuration error.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dbURL := testDatabase(t, kind, filepath.Join(t.TempDir(), "data"))
			env := []string{"OUTPRINT_DATABASE=" + dbURL, "OUTPRINT_DATA_DIR=" + t.TempDir()}
			for i := range 2 {
				out, errOut, code := runWithEnv(t, env, "migrate")
				if code != exitOK || !strings.Contains(out, "up to date") {
					t.Fatalf("migrate #%d = exit %d, stdout %q, stderr %q; want 0 and up to date", i+1, code, out, errOut)
				}
			}
			// The tables are there: a job service accepts a job.
			ctx := context.Background()
			db, err := jobs.Open(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			st, err := store.NewFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			svc, err := jobs.New(db, st, nil, jobs.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.Submit(ctx, jobs.Input{Tenant: "t", User: "u", Markdown: []byte("# x\n")}); err != nil {
				t.Errorf("Submit after migrate = %v", err)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := runWithEnv(t, []string{"OUTPRINT_DATABASE=postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, "migrate")
		if code != exitInternal || !strings.Contains(errOut, "outprint migrate") {
			t.Errorf("migrate of an unreachable database = exit %d, stderr %q; want %d", code, errOut, exitInternal)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := runWithEnv(t, []string{"OUTPRINT_DATABASE=mysql://x"}, "migrate")
		if code != exitUsage || !strings.Contains(errOut, "OUTPRINT_DATABASE") {
			t.Errorf("migrate of a malformed database URL = exit %d, stderr %q; want %d naming the variable", code, errOut, exitUsage)
		}
	})
}

// storedTenantJob reads a job of tenant from the database directly, as
// the next process would find it.
func storedTenantJob(t *testing.T, dbURL, dataDir, id, tenant string) jobs.Job {
	t.Helper()
	ctx := context.Background()
	db, err := jobs.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	st, err := store.NewFS(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := jobs.New(db, st, nil, jobs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := svc.Get(ctx, tenant, id)
	if err != nil {
		t.Fatalf("stored job %s: %v", id, err)
	}
	return j
}
