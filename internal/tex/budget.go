package tex

import "math"

// The pool's memory budget: every zygote and process counts by an
// estimate of the memory it holds (its proportional set size, PSS), so a
// server in a container of 1 GiB keeps what fits and no more.

// Estimates of what the pool's processes hold, measured on Debian 13's TeX
// Live (2026-12-04, smaps_rollup): a zygote pair, XeTeX with the arrays its
// warm-up filled and its driver zygote, about 210 MiB of RSS; a warm
// process of its own as much; a zygote's child shares its zygote's pages
// and holds only what it writes, a few MiB while it waits and more while
// it typesets (bench/memory measures the whole server's PSS at saturation).
const (
	zygoteBytes = 224 << 20
	ownBytes    = 224 << 20
	childBytes  = 96 << 20
)

// serverBytes is the memory kept for outprint itself (its PSS with the
// job service, admission and a render's conversion under way) when the
// pool's budget is derived from the memory limit.
const serverBytes = 160 << 20

// DefaultPoolMemory is the default PoolConfig.Memory: four fifths of the
// memory limit (the cgroup's, else the machine's, as DefaultCapacity reads
// it) less what outprint itself needs, so a worker with every profile in
// use stays under 80 % of its limit; at least one process of its own.
func DefaultPoolMemory() int64 {
	return poolMemory(thisMachine())
}

func poolMemory(m machine) int64 {
	return PoolMemoryFor(m.memory())
}

// PoolMemoryFor is the pool's memory budget DefaultPoolMemory derives
// from a memory limit of limit bytes (bench/memory emulates a worker's
// 1 GiB with it); no bound when limit is 0.
func PoolMemoryFor(limit int64) int64 {
	if limit <= 0 {
		return math.MaxInt64 / 4 // nothing to derive a bound from
	}
	return max(limit/5*4-serverBytes, ownBytes)
}

// costLocked is the estimated memory of a process started now for prof:
// a zygote's child when prof has a zygote ready, else a process of its
// own.
func (p *Pool) costLocked(prof *profile) int64 {
	if len(prof.zygotes.ready) > 0 {
		return childBytes
	}
	return ownBytes
}

// fitsLocked reports whether cost more fits in the budget.
func (p *Pool) fitsLocked(cost int64) bool {
	return p.mem+cost <= p.cfg.Memory
}

func (p *Pool) addMemLocked(n int64) {
	p.mem += n
	p.memPeak = max(p.memPeak, p.mem)
}

// shedZygoteLocked retires a zygote of another profile than prof to make
// room for a render of prof: a spare zygote first, else the serving
// zygote of the profile used least recently. Its tending goroutine ends
// it and gives its memory back (tendZygote).
func (p *Pool) shedZygoteLocked(prof *profile) {
	var victim *zygote
	var victimProf *profile
	for _, other := range p.profiles {
		zs := other.zygotes.ready
		if other == prof || len(zs) == 0 {
			continue
		}
		if len(zs) > 1 {
			victim = zs[len(zs)-1]
			break
		}
		if victimProf == nil || other.lastUsed.Before(victimProf.lastUsed) {
			victim, victimProf = zs[0], other
		}
	}
	if victim != nil {
		p.retireZygoteLocked(victim)
	}
}

// starvedLocked reports whether a render waits for a process that is
// neither warm nor starting: then a zygote starts only with room for that
// process beside it, and other preambles start no spares.
func (p *Pool) starvedLocked() bool {
	for _, prof := range p.profiles {
		if prof.waiting > len(prof.warm)+prof.starting {
			return true
		}
	}
	return false
}
