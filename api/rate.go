package api

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Rate is a replay's rate as a program gives it: a JSON number of messages
// per second, or the string "max" (unpaced); a numeric string is accepted
// too.
type Rate string

// UnmarshalJSON accepts a number or a string.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*r = Rate(s)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("rate must be a number of messages per second or \"max\"")
	}
	*r = Rate(strconv.FormatFloat(f, 'f', -1, 64))
	return nil
}
