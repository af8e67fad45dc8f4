package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewSettingErrors: what an operator fixes in the configuration comes
// back from New as a *SettingError naming the setting (the command exits
// 2), before any TeX process starts.
func TestNewSettingErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	data := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		name, yaml, setting string
		opts                Options
	}{
		{"port in use", fmt.Sprintf("listen: %s\ndataDir: %s\n", busy.Addr(), data), "listen (OUTPRINT_LISTEN)", Options{}},
		{"worker port in use", fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\ndatabase: postgres://x@127.0.0.1:1/db\ncluster: {secret: 0123456789abcdef0123}\nworker: {listen: %q}\n", data, busy.Addr().String()),
			"worker.listen (OUTPRINT_WORKER_LISTEN)", Options{Role: RoleWorker}},
		{"gateway on SQLite", fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\n", data), "", Options{Role: RoleGateway}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = slogJSON(io.Discard)
			m, err := New(context.Background(), writeConfig(t, tc.yaml), tc.opts)
			if err == nil {
				_ = m.Close() // New should have failed; the check below says so
			}
			var se *SettingError
			if !errors.As(err, &se) || se.Setting != tc.setting {
				t.Fatalf("New = %v, want a *SettingError for %q", err, tc.setting)
			}
		})
	}
}

// TestCheckRole: each role's refusals name the setting to fix.
func TestCheckRole(t *testing.T) {
	pg := "database: postgres://x@127.0.0.1:1/db\n"
	for _, tc := range []struct {
		role Role
		yaml string
		want string // "" for no error
	}{
		{RoleServe, "listen: 127.0.0.1:0\n", ""},
		{RoleGateway, "listen: 127.0.0.1:0\n", "the gateway role needs PostgreSQL"},
		{RoleWorker, pg, "cluster.secret"},
		{RoleGateway, pg + "cluster: {secret: 0123456789abcdef0123}\n", "gateway.workers"},
		{RoleGateway, pg + "cluster: {secret: 0123456789abcdef0123}\ngateway: {workers: [\"http://127.0.0.1:1\"]}\n", ""},
		{RoleWorker, pg + "cluster: {secret: 0123456789abcdef0123}\n", ""},
		{"janitor", "", "unknown role"},
	} {
		err := CheckRole(tc.role, writeConfig(t, tc.yaml))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckRole(%s, %q) = %v, want %q", tc.role, tc.yaml, err, tc.want)
		}
	}
}
