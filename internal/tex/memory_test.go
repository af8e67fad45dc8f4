package tex

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryUsed(t *testing.T) {
	gib := int64(1 << 30)
	meminfo := fmt.Sprintf("MemTotal: %d kB\nMemFree: 1 kB\nMemAvailable: %d kB\n", 16*gib>>10, 12*gib>>10)
	tests := []struct {
		name              string
		files             map[string]string
		wantUsed, wantLim int64
	}{
		{"machine only", map[string]string{"meminfo": meminfo}, 4 * gib, 16 * gib},
		{"v2 own cgroup", map[string]string{
			"self": "0::/svc/outprint\n", "cgroup/svc/outprint/memory.current": "734003200\n",
			"cgroup/svc/outprint/memory.max": fmt.Sprint(2 * gib), "meminfo": meminfo,
		}, 734003200, 2 * gib},
		{"v2 unlimited", map[string]string{
			"cgroup/memory.current": "1048576\n", "cgroup/memory.max": "max\n", "meminfo": meminfo,
		}, 1 << 20, 16 * gib},
		{"v1", map[string]string{
			"self":                                "4:memory:/\n",
			"cgroup/memory/memory.usage_in_bytes": "5242880\n",
			"cgroup/memory/memory.limit_in_bytes": fmt.Sprint(3 * gib),
			"meminfo":                             meminfo,
		}, 5 << 20, 3 * gib},
		{"nothing readable", map[string]string{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := machine{
				cgroupRoot: filepath.Join(root, "cgroup"), selfCgroup: filepath.Join(root, "self"),
				meminfo: filepath.Join(root, "meminfo"), numCPU: 2,
			}
			if used, lim := m.memoryUsed(), m.memory(); used != tt.wantUsed || lim != tt.wantLim {
				t.Errorf("memoryUsed, memory(%v) = %d, %d, want %d, %d", tt.files, used, lim, tt.wantUsed, tt.wantLim)
			}
		})
	}
	if used, lim := Memory(); used <= 0 || lim <= 0 || used > lim*2 {
		t.Errorf("Memory() on this machine = %d, %d, want both positive", used, lim)
	}
}
