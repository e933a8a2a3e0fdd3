package engine

import (
	"fmt"
)

// ParkResult says what a park moved.
type ParkResult struct {
	ReplayID string `json:"replay_id"`
	Queue    string `json:"queue"`  // the parking queue
	Parked   int    `json:"parked"` // copies the broker confirmed in the parking queue
	// Duplicates are parked copies whose originals could not be acked (the
	// connection was lost): the originals are back in the DLQ as well.
	Duplicates int `json:"duplicates,omitempty"`
	// InDoubt are copies published without a confirm before the connection
	// was lost: they may or may not be in the parking queue; their
	// originals stay in the DLQ.
	InDoubt int `json:"in_doubt,omitempty"`
	Failed  int `json:"failed"` // refused by the broker (unroutable, nacked): originals left in the DLQ
}

// ParkingQueue is the default parking queue of a DLQ.
func ParkingQueue(dlq string) string { return dlq + ".parking" }

// faults describes what did not go cleanly ("" when everything did).
func (res ParkResult) Faults() string {
	s := ""
	if res.Duplicates > 0 {
		s += fmt.Sprintf("; %d of them are also still in the DLQ (their originals could not be acked)", res.Duplicates)
	}
	if res.InDoubt > 0 {
		s += fmt.Sprintf("; %d more were in flight when the connection was lost (they may be in both queues; originals kept)", res.InDoubt)
	}
	if res.Failed > 0 {
		s += fmt.Sprintf("; %d were refused by the broker and stay in the DLQ", res.Failed)
	}
	return s
}
