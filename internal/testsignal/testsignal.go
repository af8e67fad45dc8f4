// Package testsignal lets tests wait on events inside the code they test
// (a pool warmed a process, a job settled, a sweep ran) instead of
// sleeping or polling, as River's testsignal does. A Signal's zero value
// is what the shipped binary has: Signal does nothing. Tests call Init
// (through the TestSignals.Init of the package that has them), after
// which each Signal queues its value for Wait.
package testsignal

import "time"

// TB is the part of testing.TB a signal uses; the package does not
// import testing, so it costs the binary nothing.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// capacity is how many signals may wait unread before one is reported
// lost.
const capacity = 256

// Signal is one kind of event.
type Signal[T any] struct {
	ch chan T
	tb TB
}

// Init makes the signal record its events for tb. Only tests call it,
// before the code under test runs.
func (s *Signal[T]) Init(tb TB) {
	s.ch = make(chan T, capacity)
	s.tb = tb
}

// Signal records one event. Without Init it does nothing; it never blocks.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
		s.tb.Errorf("test signal full: more than %d events unread", capacity)
	}
}

// Wait returns the next event, or fails the test after timeout.
func (s *Signal[T]) Wait(timeout time.Duration) (v T, ok bool) {
	s.tb.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v = <-s.ch:
		return v, true
	case <-t.C:
		s.tb.Errorf("no test signal within %s", timeout)
		return v, false
	}
}

// WaitFor returns the first event for which match holds, dropping the
// others, or fails the test after timeout.
func (s *Signal[T]) WaitFor(timeout time.Duration, match func(T) bool) (v T, ok bool) {
	s.tb.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case v = <-s.ch:
			if match(v) {
				return v, true
			}
		case <-t.C:
			s.tb.Errorf("no matching test signal within %s", timeout)
			return v, false
		}
	}
}

// C is the channel of the recorded events, for a test's select.
func (s *Signal[T]) C() <-chan T { return s.ch }
