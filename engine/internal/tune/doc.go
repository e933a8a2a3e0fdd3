// Package tune holds the engine's knobs that only the engine's own tests
// turn: review.Config.Tune, a Knobs. Production (cmd/dlqbot) sets none of
// them, and Go's internal rule keeps every package outside engine/ from
// naming this one, so nothing outside engine/ can set them; their zero
// values are the defaults the engine runs with. The knobs production or
// other packages' tests set stay review.Config's own fields.
//
// Where each part lives:
//
//	knobs.go  Knobs, each knob with its default, and WithDefaults
package tune
