package bot

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// slackGroups reads user groups from Slack: one usergroups.list call
// (with members) serves every user for ttl.
type slackGroups struct {
	api *slack.Client
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	byUser map[string][]string
	at     time.Time
}

// GroupsOf returns the ids of the user groups user belongs to.
func (g *slackGroups) GroupsOf(ctx context.Context, user string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byUser == nil || g.now().Sub(g.at) >= g.ttl {
		list, err := g.api.GetUserGroupsContext(ctx, slack.GetUserGroupsOptionIncludeUsers(true))
		if err != nil {
			return nil, fmt.Errorf("bot: usergroups.list: %w", err)
		}
		by := map[string][]string{}
		for _, ug := range list {
			for _, u := range ug.Users {
				by[u] = append(by[u], ug.ID)
			}
		}
		g.byUser, g.at = by, g.now()
	}
	return slices.Clone(g.byUser[user]), nil
}
