//go:build race

package highlight

// raceEnabled is set when the tests run with the race detector, which
// makes CPU-heavy tests several times slower: they check less then.
const raceEnabled = true
