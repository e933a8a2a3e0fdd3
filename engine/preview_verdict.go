package engine

// Warnings counts what a preview's verdict calls problems: each of its
// problems, and one more when failures are still arriving (their cause
// may not be fixed yet). Every front end's headline counts with it: 0 is
// "safe to replay", more is "N problems".
func Warnings(problems []Problem, a *Arrivals) int {
	n := len(problems)
	if StillArriving(a) {
		n++
	}
	return n
}

// StillArriving reports whether any of a preview's selected messages was
// dead-lettered within the recent window (false without arrivals).
func StillArriving(a *Arrivals) bool { return a != nil && a.StillArriving() }

// Warnings counts the problems p's verdict names (see Warnings).
func (p *Preview) Warnings() int { return Warnings(p.Problems, p.Arrivals) }

// Warnings counts the problems the card's verdict names (see Warnings).
func (c *PreviewCard) Warnings() int { return Warnings(c.Problems, c.Arrivals) }
