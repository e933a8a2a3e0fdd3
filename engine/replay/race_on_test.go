//go:build race

package replay_test

// raceOn is set when the race detector is on: big tests scale down, since
// it makes the engine's own code several times slower.
const raceOn = true
