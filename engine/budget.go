package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"
)

// Reads of a quorum DLQ cost delivery attempts. Every read gives the
// messages it does not move back with basic.nack(requeue), and RabbitMQ
// before 4.3 counts each give-back against the queue's delivery limit: on
// RabbitMQ 3.x the message's delivery_count, on 4.0–4.2 its acquired_count
// (both shown on delivery as x-delivery-count). A give-back that takes the
// count past the limit (count > limit) drops the message, or dead-letters
// it when the DLQ has a dead-letter exchange of its own. From 4.3 only
// failed deliveries count (basic.reject, a lost channel), and nack(requeue)
// does not: no budget applies there, nor to classic queues.
//
// dlqbot keeps one give-back in reserve: a read is made only when no
// message of the queue reaches its limit by it (count+1 < limit), so that a
// read cut short by a lost connection, which gives everything back once
// more, drops nothing either.

// ReadCounts describes a queue's read budget: whether giving a message back
// counts against its delivery limit, where the limit comes from, and the
// highest delivery count a read left on one of its messages.
type ReadCounts struct {
	// RequeueCounts is true when a give-back (basic.nack with requeue) counts
	// against the delivery limit: a quorum queue with a limit on RabbitMQ
	// before 4.3. Every read of such a queue is budgeted.
	RequeueCounts bool `json:"requeue_counts,omitempty"`
	// LimitFrom says where the delivery limit comes from: "argument",
	// "policy", "operator policy" or "default" (4.0+'s 20).
	LimitFrom string `json:"limit_from,omitempty"`
	// DeliveryCount is the highest delivery count a message of the queue is
	// known to have: what the last read left (remembered across replicas),
	// 0 when none is remembered.
	DeliveryCount int `json:"delivery_count,omitempty"`
	// Policy is the user policy applied to the queue, nil when none. Only
	// one policy applies to a queue, so a higher limit belongs in it.
	Policy *Policy `json:"policy,omitempty"`
	// OperatorPolicy names the operator policy applied to the queue ("" when
	// none); its delivery-limit caps the policy's.
	OperatorPolicy string `json:"operator_policy,omitempty"`
	// BrokerVersion is RabbitMQ's version ("4.0.5"); "" when unknown.
	BrokerVersion string `json:"broker_version,omitempty"`
}

// Policy is a RabbitMQ policy as the management API reports it.
type Policy struct {
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply_to"`
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}

// ReadsLeft is how many more reads of the queue its delivery limit allows
// (one give-back kept in reserve); -1 when no budget applies.
func (q QueueInfo) ReadsLeft() int {
	if !q.RequeueCounts {
		return -1
	}
	return max(0, q.DeliveryLimit-1-q.DeliveryCount)
}

// ReadMark is what the last read of a queue left: the highest delivery
// count of the messages it gave back, and when.
type ReadMark struct {
	Count int       `json:"count"`
	At    time.Time `json:"at"`
	// Reads counts the reads recorded since the queue was last seen whole.
	Reads int `json:"reads"`
}

// ReadMarks remembers read marks per queue across replicas, so that a read
// on one process knows what reads on others left (counts are only seen on
// delivery).
type ReadMarks interface {
	// LastRead returns queue's mark; ok is false when none is recorded.
	LastRead(ctx context.Context, vhost, queue string) (m ReadMark, ok bool, err error)
	// RecordRead stores a read of queue. A whole read (it saw every message)
	// replaces the mark; a partial one only raises its count.
	RecordRead(ctx context.Context, vhost, queue string, m ReadMark, whole bool) error
}

// ReadBudgetError is a read refused (or stopped midway) because it could
// bring a message to its delivery limit. It matches ErrReadBudget.
type ReadBudgetError struct {
	Queue string
	// Limit is the effective delivery limit and LimitFrom where it comes from.
	Limit     int
	LimitFrom string
	// Count is the highest delivery count known on a message of the queue.
	Count int
	// Need is how many reads were wanted, Left how many the limit leaves.
	Need, Left int
	// Midway is set when a read stopped at a delivery whose count had
	// reached the budget (someone else had read the queue): the messages it
	// held were given back.
	Midway bool
	// Version is RabbitMQ's version, "" when unknown.
	Version string
	// Raise says how to raise the limit (see RaiseLimit); "" when unknown.
	Raise string
	// Failures is set on RabbitMQ 4.3+, which counts no give-back but
	// does count a delivery lost with its connection or rejected: Count is
	// then the message's failed deliveries (x-delivery-count), at its
	// limit, and one more — the read's connection lost while it holds the
	// message — would take it past and the broker would drop it.
	Failures bool
}

func (e *ReadBudgetError) Error() string {
	counts := "RabbitMQ before 4.3 counts every give-back"
	if e.Version != "" {
		counts = "RabbitMQ " + e.Version + " counts every give-back"
	}
	if e.Failures {
		counts = "RabbitMQ " + e.Version + " counts no give-back, but counts a delivery lost with its connection (x-delivery-count), and one more lost read would take that message past its limit"
	}
	from := ""
	if e.LimitFrom != "" {
		from = " (" + e.LimitFrom + ")"
	}
	raise := "Raise the limit to read it again"
	switch {
	case strings.HasPrefix(e.Raise, "rabbitmqctl"):
		raise += ": " + e.Raise
	case e.Raise != "":
		raise += " (" + e.Raise + ")"
	}
	if e.Midway {
		return fmt.Sprintf("read budget: a message of %s arrived with delivery count %d and its delivery limit is %d%s, so dlqbot stopped reading it: the messages it held were given back and none was dropped; %s. %s",
			e.Queue, e.Count, e.Limit, from, counts, raise)
	}
	need := "a read needs 1"
	if e.Need > 1 {
		need = fmt.Sprintf("this needs %d reads", e.Need)
	}
	return fmt.Sprintf("read budget: %s has a delivery limit of %d%s and earlier reads gave a message back %d time(s); %s and the limit leaves %d (one give-back is kept in reserve), so nothing was read; %s. %s",
		e.Queue, e.Limit, from, e.Count, need, e.Left, counts, raise)
}

// Unwrap makes a ReadBudgetError match ErrReadBudget.
func (e *ReadBudgetError) Unwrap() error { return ErrReadBudget }

// BudgetUnknownError is a read of a queue refused before it began because
// its read budget cannot be told: the management API, which alone knows a
// queue's type, delivery limit and the broker's version, could not answer,
// or answered with a version dlqbot cannot read. A quorum queue read
// unbudgeted could have its messages dropped by the broker, so the read is
// not made (fail closed). It matches ErrBudgetUnknown.
type BudgetUnknownError struct {
	Queue string
	// Reason says what could not be told ("management API unreachable").
	Reason string
	// Err is the underlying error, nil when there is none.
	Err error
}

func (e *BudgetUnknownError) Error() string {
	return fmt.Sprintf("cannot tell the delivery limit of %s: %s; dlqbot reads a queue that may be a quorum queue only when it knows what the read costs, so nothing was read", e.Queue, e.Reason)
}

// Unwrap makes a BudgetUnknownError match ErrBudgetUnknown.
func (e *BudgetUnknownError) Unwrap() error { return ErrBudgetUnknown }

// budgetError is the error for reading q need more times, nil when the
// budget allows it; raise says how to raise the limit.
func BudgetError(q QueueInfo, need int, raise string) error {
	left := q.ReadsLeft()
	if left < 0 || left >= need {
		return nil
	}
	return &ReadBudgetError{Queue: q.Name, Limit: q.DeliveryLimit, LimitFrom: q.LimitFrom,
		Count: q.DeliveryCount, Need: need, Left: left, Version: q.BrokerVersion, Raise: raise}
}

// RereadsPerStep is how many reads of the DLQ a step makes to look for
// returns, besides its move: the last look once the step settled.
const RereadsPerStep = 1

// ReadsNeeded is how many reads of the DLQ a replay of total messages makes
// with p's steps: the approval's comparison, then per step its move and
// rereads looks for returns. It also returns the number of steps.
func ReadsNeeded(total int, p Params, rereads int) (reads, steps int) {
	p = p.WithDefaults()
	for sent := 0; sent < total; {
		steps++
		sent += StepSize(p.Step, p.Cap, steps)
	}
	return 1 + steps*(1+rereads), steps
}

// SuggestedLimit is a delivery limit that leaves room for need more reads
// of q (with the reserve and a margin), at least twice the current one,
// rounded up to a multiple of 10.
func SuggestedLimit(q QueueInfo, need int) int {
	n := max(q.DeliveryCount+need+1+5, 2*q.DeliveryLimit)
	return (n + 9) / 10 * 10
}

// RaiseLimit says how to give q a delivery limit of limit: the exact
// rabbitmqctl command line, or why a policy cannot do it.
func RaiseLimit(vhost string, q QueueInfo, limit int) string {
	if vhost == "" {
		vhost = "/"
	}
	if q.LimitFrom == "argument" {
		return fmt.Sprintf("the limit is %s's own x-delivery-limit argument, which a policy cannot raise (RabbitMQ applies the smaller of the two); only declaring the queue again with a higher limit can", q.Name)
	}
	var cmd string
	if p := q.Policy; p != nil {
		def := maps.Clone(p.Definition)
		if def == nil {
			def = map[string]any{}
		}
		def["delivery-limit"] = limit
		js, _ := json.Marshal(def) // cannot fail: decoded from JSON, plus an int
		applyTo := p.ApplyTo
		if applyTo == "" {
			applyTo = "all"
		}
		cmd = fmt.Sprintf("rabbitmqctl set_policy -p %s --priority %d --apply-to %s %s %s %s",
			shellQuote(vhost), p.Priority, applyTo, shellQuote(p.Name), shellQuote(p.Pattern), shellQuote(string(js)))
	} else {
		cmd = fmt.Sprintf("rabbitmqctl set_policy -p %s --apply-to queues %s %s %s",
			shellQuote(vhost), shellQuote("dlqbot-limit-"+q.Name), shellQuote("^"+regexp.QuoteMeta(q.Name)+"$"),
			shellQuote(fmt.Sprintf(`{"delivery-limit":%d}`, limit)))
	}
	if q.OperatorPolicy != "" {
		cmd += fmt.Sprintf(" (operator policy %s caps the limit too: raise its delivery-limit as well)", q.OperatorPolicy)
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// BudgetView is the preview's account of the DLQ's read budget.
type BudgetView struct {
	// Limit is the effective delivery limit and LimitFrom where it comes from.
	Limit     int    `json:"limit"`
	LimitFrom string `json:"limit_from,omitempty"`
	// DeliveryCount is the highest delivery count a message has now.
	DeliveryCount int `json:"delivery_count"`
	// ReadsLeft is how many more reads the limit allows.
	ReadsLeft int `json:"reads_left"`
	// ReadsNeeded is how many reads a replay of the selection makes with
	// the default steps, in Steps steps.
	ReadsNeeded int `json:"reads_needed"`
	Steps       int `json:"steps"`
	// Raise is how to raise the limit (a command line, or why a policy
	// cannot).
	Raise string `json:"raise"`
}
