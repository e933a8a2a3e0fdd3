package commands

import (
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults of a WatchRule.
const (
	DefaultWatchThreshold = 10
	DefaultWatchWithin    = 5 * time.Minute
)

// WatchRule is one entry of the permissions file's watch: section: the
// DLQs matching Queues (globs, as in a grant) are watched, and an alert
// goes to Channel when a DLQ's depth grows by Threshold or more within
// Within.
type WatchRule struct {
	Queues  []string
	Channel string
	// Threshold is how many new dead letters raise an alert; zero means
	// DefaultWatchThreshold.
	Threshold int
	// Within is the window they must arrive in; zero means
	// DefaultWatchWithin.
	Within time.Duration
}

// Matches reports whether the rule watches queue.
func (w WatchRule) Matches(queue string) bool {
	for _, q := range w.Queues {
		if matchGlob(q, queue) {
			return true
		}
	}
	return false
}

// WatchFor returns the first rule that watches queue (rules are read in
// the file's order), and whether there is one.
func (p *Policy) WatchFor(queue string) (WatchRule, bool) {
	if p == nil {
		return WatchRule{}, false
	}
	for _, w := range p.Watch {
		if w.Matches(queue) {
			return w, true
		}
	}
	return WatchRule{}, false
}

func parseWatch(n *yaml.Node, p *Policy) error {
	return each(n, "watch", func(item *yaml.Node) error {
		w := WatchRule{Threshold: DefaultWatchThreshold, Within: DefaultWatchWithin}
		err := fields(item, "a watch rule", []string{"queues", "channel", "threshold", "within"}, func(key string, v *yaml.Node) error {
			switch key {
			case "channel":
				s, err := scalar(v, "channel")
				if err != nil {
					return err
				}
				if !channelIDPattern.MatchString(s) {
					return errAt(v, "channel %q is not a Slack channel id (like C0123ABCD; in Slack, the channel's details show it)", s)
				}
				w.Channel = s
			case "threshold":
				var k int
				if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&k) != nil || k < 1 {
					return errAt(v, "threshold must be a number of dead letters (1 or more), not %q", v.Value)
				}
				w.Threshold = k
			case "within":
				d, err := time.ParseDuration(v.Value)
				if v.Kind != yaml.ScalarNode || err != nil || d < 10*time.Second || d > 24*time.Hour {
					return errAt(v, "within must be a duration between 10s and 24h (like 5m), not %q", v.Value)
				}
				w.Within = d
			default:
				return each(v, "queues", func(q *yaml.Node) error {
					s, err := scalar(q, "a queue pattern")
					if err == nil {
						err = checkGlob(q, s)
					}
					w.Queues = append(w.Queues, s)
					return err
				})
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case len(w.Queues) == 0:
			return errAt(item, "a watch rule names no queues; list the DLQs to watch under queues:")
		case w.Channel == "":
			return errAt(item, "a watch rule names no channel; give the Slack channel id its alerts go to under channel:")
		}
		p.Watch = append(p.Watch, w)
		return nil
	})
}
