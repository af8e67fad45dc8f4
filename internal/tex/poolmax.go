package tex

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// processBytes is the memory budgeted per TeX process (its address-space
// rlimit is limits.RenderMemoryBytes; resident use is far below it).
const processBytes = 1 << 30

// reserveBytes is memory kept for outprint itself and the system.
const reserveBytes = 512 << 20

// DefaultPoolMax is the default Pool.Max: two processes per CPU (one
// typesetting while its replacement warms up), bounded by the memory
// available at about 1 GiB per process, and at least 1. CPUs and memory
// come from the cgroup limits (v2 cpu.max and memory.max; v1
// cpu.cfs_quota_us / cpu.cfs_period_us and memory.limit_in_bytes), else
// from the machine (runtime.NumCPU, /proc/meminfo).
func DefaultPoolMax() int {
	return poolMax(thisMachine())
}

// machine says where to read the limits from (tests point it at a fake
// tree).
type machine struct {
	cgroupRoot string
	selfCgroup string
	meminfo    string
	numCPU     int
}

func poolMax(m machine) int {
	cpus := m.cpus()
	mem := m.memory()
	n := int(math.Ceil(cpus)) * 2
	if mem > 0 {
		byMem := int((mem - reserveBytes) / processBytes)
		if mem <= reserveBytes {
			byMem = 0
		}
		n = min(n, byMem)
	}
	return max(n, 1)
}

// cgroupDirs are the folders that may hold this process's cgroup files for
// controller ("" for v2): the process's own cgroup path under the mount,
// then the mount's root (inside a container with a cgroup namespace the
// root is the container's cgroup).
func (m machine) cgroupDirs(controller string) []string {
	base := m.cgroupRoot
	if controller != "" {
		base = filepath.Join(base, controller)
	}
	var dirs []string
	if f, err := os.Open(m.selfCgroup); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// "0::/path" (v2) or "4:memory:/path" (v1).
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			match := controller == "" && parts[0] == "0" && parts[1] == ""
			for _, c := range strings.Split(parts[1], ",") {
				if controller != "" && c == controller {
					match = true
				}
			}
			if match && parts[2] != "/" {
				dirs = append(dirs, filepath.Join(base, parts[2]))
			}
		}
		_ = f.Close() // only read
	}
	return append(dirs, base)
}

func readTrim(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// cpus is the CPU quota in CPUs, or the machine's CPU count.
func (m machine) cpus() float64 {
	for _, d := range m.cgroupDirs("") {
		if s, ok := readTrim(filepath.Join(d, "cpu.max")); ok {
			f := strings.Fields(s) // "max 100000" or "200000 100000"
			if len(f) == 2 && f[0] != "max" {
				q, err1 := strconv.ParseFloat(f[0], 64)
				p, err2 := strconv.ParseFloat(f[1], 64)
				if err1 == nil && err2 == nil && q > 0 && p > 0 {
					return min(q/p, float64(m.numCPU))
				}
			}
			break
		}
	}
	for _, ctl := range []string{"cpu", "cpu,cpuacct"} {
		for _, d := range m.cgroupDirs(ctl) {
			qs, ok1 := readTrim(filepath.Join(d, "cpu.cfs_quota_us"))
			ps, ok2 := readTrim(filepath.Join(d, "cpu.cfs_period_us"))
			if !ok1 || !ok2 {
				continue
			}
			q, err1 := strconv.ParseFloat(qs, 64)
			p, err2 := strconv.ParseFloat(ps, 64)
			if err1 == nil && err2 == nil && q > 0 && p > 0 {
				return min(q/p, float64(m.numCPU))
			}
			return float64(m.numCPU)
		}
	}
	return float64(m.numCPU)
}

// memory is the memory limit in bytes: the cgroup's, else the machine's
// MemTotal; 0 when nothing can be read.
func (m machine) memory() int64 {
	total := m.memTotal()
	limit := int64(0)
	for _, d := range m.cgroupDirs("") {
		if s, ok := readTrim(filepath.Join(d, "memory.max")); ok {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
				limit = v
			}
			break
		}
	}
	if limit == 0 {
		for _, d := range m.cgroupDirs("memory") {
			if s, ok := readTrim(filepath.Join(d, "memory.limit_in_bytes")); ok {
				// "No limit" is a huge number (PAGE_COUNTER_MAX pages).
				if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 && v < 1<<60 {
					limit = v
				}
				break
			}
		}
	}
	switch {
	case limit > 0 && total > 0:
		return min(limit, total)
	case limit > 0:
		return limit
	}
	return total
}

func (m machine) memTotal() int64 {
	f, err := os.Open(m.meminfo)
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }() // only read
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// DefaultCapacity is the render capacity a worker derives when
// worker.capacity is 0: one render per CPU of the cgroup limit (rounded
// up), bounded by the memory available at about one render's worth per
// process, and at least 1. It reads the same limits as DefaultPoolMax.
func DefaultCapacity() int {
	return capacity(thisMachine())
}

func capacity(m machine) int {
	n := int(math.Ceil(m.cpus()))
	if mem := m.memory(); mem > 0 {
		byMem := 0
		if mem > reserveBytes {
			byMem = int((mem - reserveBytes) / processBytes)
		}
		n = min(n, byMem)
	}
	return max(n, 1)
}
