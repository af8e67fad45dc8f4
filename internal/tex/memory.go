package tex

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Memory returns the memory the service uses and the limit it must stay
// under, for /metrics: the cgroup's use (v2 memory.current, v1
// memory.usage_in_bytes; outprint and every TeX process it started count
// there) and its limit, as DefaultPoolMax reads it. Without a cgroup to read
// it returns the machine's use (MemTotal - MemAvailable) and MemTotal. A
// figure that cannot be read is 0. It reads a few small files, so a scrape
// can call it.
func Memory() (used, limit int64) {
	m := thisMachine()
	return m.memoryUsed(), m.memory()
}

func thisMachine() machine {
	return machine{
		cgroupRoot: "/sys/fs/cgroup",
		selfCgroup: "/proc/self/cgroup",
		meminfo:    "/proc/meminfo",
		numCPU:     runtime.NumCPU(),
	}
}

// memoryUsed is the cgroup's memory use, else the machine's.
func (m machine) memoryUsed() int64 {
	for _, d := range m.cgroupDirs("") {
		if s, ok := readTrim(filepath.Join(d, "memory.current")); ok {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
				return v
			}
			break
		}
	}
	for _, d := range m.cgroupDirs("memory") {
		if s, ok := readTrim(filepath.Join(d, "memory.usage_in_bytes")); ok {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
				return v
			}
			break
		}
	}
	total, avail := m.meminfoFields()
	if total > 0 && avail > 0 && avail <= total {
		return total - avail
	}
	return 0
}

// meminfoFields returns MemTotal and MemAvailable in bytes (0 when absent).
func (m machine) meminfoFields() (total, avail int64) {
	f, err := os.Open(m.meminfo)
	if err != nil {
		return 0, 0
	}
	defer func() { _ = f.Close() }() // only read
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil {
			continue
		}
		switch fs[0] {
		case "MemTotal:":
			total = kb << 10
		case "MemAvailable:":
			avail = kb << 10
		}
	}
	return total, avail
}
