package store

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// groupSync makes the store's recent writes durable with one syncfs(2) for
// many callers. A write that fsyncs its own file and folders costs the
// kernel a writeback and a journal check per file and per folder, and at
// hundreds of job inputs a second that work, not the disk, bounds
// acceptance; one filesystem-wide sync per group commits them all in one
// journal transaction. Callers that arrive while a sync runs wait for it
// and share the next one, which starts after their writes, as a database's
// group commit does.
//
// The price is that syncfs also writes back whatever else is dirty on the
// store's filesystem; the data folder normally holds only the store.
type groupSync struct {
	do func() error // the sync itself: syncfs of the store's root

	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	started uint64 // syncs started so far
	done    uint64 // syncs finished so far (done == started when idle)
	waiting int    // callers waiting for a sync to finish
	// failed is the number of the latest sync that failed, and err its
	// error: a caller whose sync (or a later one) failed gets the error.
	failed uint64
	err    error
}

func newGroupSync(root string) *groupSync {
	g := &groupSync{do: func() error { return syncfs(root) }}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// sync returns once a sync that started after the call has finished,
// so everything the caller wrote before calling is durable when it
// returns nil. It does not take a context: a sync cannot be abandoned
// half-way, and it is bounded by the disk.
func (g *groupSync) sync() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// A sync running now may have started before our writes; ours is
	// the next one to start.
	mine := g.started + 1
	for g.done < mine {
		if g.running {
			g.waiting++
			g.cond.Wait()
			g.waiting--
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		err := g.do()
		g.mu.Lock()
		g.running = false
		g.done = n
		if err != nil {
			g.failed, g.err = n, err
		}
		g.cond.Broadcast()
	}
	if g.failed >= mine {
		return g.err
	}
	return nil
}

// syncfs commits every dirty file and folder of the filesystem holding
// root. Since Linux 5.8 it reports writeback errors that happened since
// the descriptor was opened, so it is opened per sync.
func syncfs(root string) error {
	d, err := os.Open(root)
	if err != nil {
		return fmt.Errorf("syncfs: %w", err)
	}
	err = unix.Syncfs(int(d.Fd()))
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", root, err)
	}
	return nil
}
