package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// handedOut are the ports FreePort gave this test binary: tests that run
// in parallel never get the same one, even while its process has not
// bound it yet.
var handedOut struct {
	mu    sync.Mutex
	ports map[int]bool
}

// FreePort returns a loopback port for a process the test starts (and may
// restart on the same address). It comes from below the kernel's
// ephemeral range, like S3's ports: a port from inside it, free when
// asked, may be any outgoing connection's by the time the process binds
// it, and parallel tests make many connections. No other FreePort call
// of this test binary returns it again.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 1000 {
		p := 10000 + rand.IntN(low-10000)
		if handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close() // only asked whether it was free
		handedOut.ports[p] = true
		return p
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}
