package bot

import "github.com/stroma/dlqbot/blocks"

// The policy's per-DLQ channel allowlists (commands.Policy.CheckChannel,
// the check ops applies to a preview) hold for every place a replay is
// shown: its progress message, its thread's step replies and follow-up
// checks. A replay approved where the policy does not allow its DLQ (a
// `replay <token>` typed in another channel, an API approval of a
// preview posted elsewhere) is shown in the activity channel instead,
// when the policy allows that, else in no channel; the approver is told
// where, privately. The activity channel is one of those places: its
// lines about a replay (start, steps that change its state, stop, end,
// follow-up checks, parking) are posted only when the policy allows the
// replay's DLQ there (activityChannel). Otherwise they are not posted
// anywhere else either — the replay's own thread and channel carry the
// same news — and each one left out is logged at Info with the replay's
// id.

// showable reports whether a replay of dlq may be shown in channel.
func (n *Notifier) showable(dlq, channel string) bool {
	return n.allowed == nil || n.allowed(dlq, channel)
}

// replayChannel returns the channel a replay of dlq approved in channel
// is shown in: channel itself when the policy allows it, else the
// activity channel when the policy allows that ("" when neither), and
// whether it moved.
func (n *Notifier) replayChannel(dlq, channel string) (string, bool) {
	if channel == "" || n.showable(dlq, channel) {
		return channel, false
	}
	return n.activityChannel(dlq), true
}

// activityChannel returns the activity channel when the policy allows a
// replay of dlq to be shown there, else "" (and "" without one).
func (n *Notifier) activityChannel(dlq string) string {
	if a := n.cfg.ActivityChannel; a != "" && n.showable(dlq, a) {
		return a
	}
	return ""
}

// movedNote tells the approver where a replay shown away from channel
// went, in mrkdwn: a link to the channel it moved to, or none.
func movedNote(dlq, from, to string) string {
	dlq = blocks.EscapeKeepCode(dlq)
	if to == "" {
		return "Its progress is not posted in <#" + from + ">: the policy does not allow `" + dlq + "` there, nor in the activity channel. Follow it with `status`."
	}
	return "Its progress is in <#" + to + ">, not in <#" + from + ">: the policy does not allow `" + dlq + "` there."
}
