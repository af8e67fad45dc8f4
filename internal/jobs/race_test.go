//go:build race

package jobs

// raceEnabled tells the burst test's log that numbers are inflated by -race.
const raceEnabled = true
