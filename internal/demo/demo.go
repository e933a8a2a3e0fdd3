package demo

import (
	"fmt"

	"github.com/stroma/dlqbot/internal/demo/slackstub"
)

// The demo workspace's channels and user.
const (
	Channel         = "C0INCIDENTS"   // #incidents, where /dlq is typed
	ActivityChannel = "C0DLQACTIVITY" // #dlq-activity, dlqbot's activity lines
	User            = "U0DEMOUSER"    // whoever uses the page
)

// Web describes the stand-in's page for the demo: #incidents (channel)
// and #dlq-activity (activity), the user, an explanation of the seeded
// DLQ, and the commands to try. Commands and clicks go to the bot at
// botURL.
func Web(q Queues, botURL, channel, activity string) slackstub.WebConfig {
	return slackstub.WebConfig{
		Team:     "dlqbot demo",
		BotURL:   botURL,
		Command:  "/dlq",
		User:     User,
		UserName: "you",
		Channels: []slackstub.WebChannel{
			{ID: channel, Name: "incidents", Topic: "Dead letters piling up? Preview, approve, replay in canary steps.",
				Intro: fmt.Sprintf("`%s` holds 80 dead letters from two services, most of them from a burst right after "+
					"a deploy two hours ago. *%s* (45 rejected after the deploy, 5 Spring timeouts without a failure time): "+
					"its consumer is fixed now. *%s* (20 EUR rejected after the deploy, 10 currency `XTS` faults): its "+
					"consumer is fixed for EUR but still rejects `XTS`, and new `XTS` failures keep arriving.\n"+
					"Preview the whole DLQ to see when they failed, preview each source, approve, and watch the canary "+
					"steps in the preview's thread — orders finish, payments stop by themselves. *Preview this group* "+
					"on the payments' `rejected` group previews just the EUR part the fix covers. Then "+
					"`/dlq check &lt;replay&gt;` shows what came back.",
					q.DLQ, q.Orders, q.Payments)},
			{ID: activity, Name: "dlq-activity", Topic: "One line per replay event from dlqbot",
				Intro: "dlqbot posts one line here per replay event: started, paused, stopped, finished, follow-up checks."},
		},
		Notice: "*Local Slack stand-in* for `dlqbot demo`: the real bot runs against your RabbitMQ and Redis; " +
			"nothing here reaches Slack.",
		Suggestions: []string{
			"/dlq help",
			"/dlq preview " + q.DLQ,
			"/dlq preview " + q.DLQ + " source=" + q.Orders,
			"/dlq preview " + q.DLQ + " source=" + q.Payments,
			"/dlq list",
		},
	}
}
